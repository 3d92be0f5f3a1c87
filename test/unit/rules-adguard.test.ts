// The AdGuard DNS filtering syntax subset, rule by rule, against the compiled index (no sockets:
// the provider is exercised over real sockets in test/integration/adguard-rule.test.ts).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import type { AdguardIndex } from "../../src/engine/rules/adguard/index.js";
import { adguardInlineProblems, loadAdguardIndex, type SkippedReport } from "../../src/engine/rules/adguard/load.js";
import { regexpLiteral } from "../../src/engine/rules/adguard/literal.js";
import { parseAdguardLine, type ParsedRule } from "../../src/engine/rules/adguard/parse.js";
import { RuleSyntaxError } from "../../src/engine/rules/domain.js";
import { KeywordAutomaton } from "../../src/engine/rules/keywords.js";

async function index(rules: string[], skipped: SkippedReport[] = []): Promise<AdguardIndex> {
  return loadAdguardIndex({ rules, files: [] }, (p) => p, (r) => skipped.push(r));
}

const A = QTYPE.A;
const AAAA = QTYPE.AAAA;

describe("patterns", () => {
  test("||x^ blocks the domain and its subdomains, on label boundaries", async () => {
    const ix = await index(["||example.org^"]);
    expect(ix.blocks("example.org", A)).toBe(true);
    expect(ix.blocks("www.example.org", A)).toBe(true);
    expect(ix.blocks("a.b.example.org", -1)).toBe(true);
    expect(ix.blocks("testexample.org", A)).toBe(false);
    expect(ix.blocks("example.org.uk", A)).toBe(false);
    expect(ix.blocks("org", A)).toBe(false);
  });

  test("||x without ^ is open at the end", async () => {
    const ix = await index(["||example.org"]);
    expect(ix.blocks("example.org", A)).toBe(true);
    expect(ix.blocks("sub.example.org.uk", A)).toBe(true);
    expect(ix.blocks("example.organic.test", A)).toBe(true);
    expect(ix.blocks("testexample.org", A)).toBe(false);
  });

  test("a plain domain is exact; | anchors the start or the end", async () => {
    const ix = await index(["example.org", "ample.net|", "|tracker", "|exact.test^"]);
    expect(ix.blocks("example.org", A)).toBe(true);
    expect(ix.blocks("www.example.org", A)).toBe(false);
    expect(ix.blocks("example.net", A)).toBe(true);
    expect(ix.blocks("example.net.com", A)).toBe(false);
    expect(ix.blocks("tracker.example", A)).toBe(true);
    expect(ix.blocks("a.tracker.example", A)).toBe(false);
    expect(ix.blocks("exact.test", A)).toBe(true);
    expect(ix.blocks("a.exact.test", A)).toBe(false);
  });

  test("wildcards and unanchored masks", async () => {
    const ix = await index(["||ads*.example.com^", "-banner-", "*.doubleclick.*^"]);
    expect(ix.blocks("ads1.example.com", A)).toBe(true);
    expect(ix.blocks("x.ads-eu.example.com", A)).toBe(true);
    expect(ix.blocks("ads.example.org", A)).toBe(false);
    expect(ix.blocks("top-banner-3.cdn.test", A)).toBe(true);
    expect(ix.blocks("banner.cdn.test", A)).toBe(false);
    expect(ix.blocks("g.doubleclick.net", A)).toBe(true);
    expect(ix.blocks("doubleclick.net", A)).toBe(false);
  });

  test("/regex/ rules are case-insensitive and may end in $", async () => {
    const ix = await index(["/^ad[0-9]+\\./", "/track(er)?\\.test$/"]);
    expect(ix.blocks("ad12.example", A)).toBe(true);
    expect(ix.blocks("ads.example", A)).toBe(false);
    expect(ix.blocks("x.tracker.test", A)).toBe(true);
    expect(ix.blocks("x.tracker.test.org", A)).toBe(false);
  });

  test("hosts lines block every name on them exactly; comments and headers are skipped", async () => {
    const skipped: SkippedReport[] = [];
    const ix = await index(["[Adblock Plus 2.0]", "! comment", "# comment", "", "0.0.0.0 a.test b.test # trailing", "127.0.0.1\tc.test", ":: d.test"], skipped);
    for (const n of ["a.test", "b.test", "c.test", "d.test"]) expect(ix.blocks(n, A), n).toBe(true);
    expect(ix.blocks("www.a.test", A)).toBe(false);
    expect(ix.size).toBe(4);
    expect(skipped).toEqual([]);
  });

  test("the housekeeping lines a hosts file starts with are not blocks", async () => {
    const skipped: SkippedReport[] = [];
    const ix = await index(["127.0.0.1 localhost", "127.0.0.1 localhost.localdomain", "255.255.255.255 broadcasthost", "::1 localhost ip6-localhost ip6-loopback", "fe80::1%lo0 localhost", "ff02::1 ip6-allnodes", "0.0.0.0 0.0.0.0", "0.0.0.0 ads.test"], skipped);
    expect(ix.size).toBe(1);
    expect(ix.blocks("localhost", A)).toBe(false);
    expect(ix.blocks("ads.test", A)).toBe(true);
    expect(skipped).toEqual([]);
  });

  test("many masks go through the automaton (beyond its dense table) and still match exactly", async () => {
    const rules = Array.from({ length: 3000 }, (_, i) => `||mask${i}-*.zone${i}.test^`);
    const ix = await index(rules);
    expect(ix.blocks("mask17-a.zone17.test", A)).toBe(true);
    expect(ix.blocks("mask2999-bb.zone2999.test", A)).toBe(true);
    expect(ix.blocks("mask17-a.zone18.test", A)).toBe(false);
    expect(ix.blocks("x.test", A)).toBe(false);
  });
});

describe("list files", () => {
  test("CRLF line ends, a byte order mark and several files (a $badfilter in one disables a rule in another)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-adguard-"));
    try {
      writeFileSync(join(dir, "a.txt"), "\ufeff! Title: a\r\n||a.test^\r\n0.0.0.0 h.test\r\n/^re\\.test$/\r\n||gone.test^\r\n");
      writeFileSync(join(dir, "b.txt"), "@@||ok.a.test^\n||gone.test^$badfilter\n||bad.test^$nope\n");
      const skipped: SkippedReport[] = [];
      const ix = await loadAdguardIndex({ rules: [], files: ["a.txt", "b.txt"] }, (p) => join(dir, p), (r) => skipped.push(r));
      expect(ix.blocks("x.a.test", A)).toBe(true);
      expect(ix.blocks("ok.a.test", A)).toBe(false);
      expect(ix.blocks("h.test", A)).toBe(true);
      expect(ix.blocks("re.test", A)).toBe(true);
      expect(ix.blocks("gone.test", A)).toBe(false);
      expect(skipped).toEqual([{ source: "b.txt", count: 1, first: { line: 3, text: "||bad.test^$nope", reason: "unknown modifier 'nope'" } }]);
      writeFileSync(join(dir, "b.txt"), "||fine.test^\r\n||x.test^$dnstype=\r\n");
      await expect(loadAdguardIndex({ rules: [], files: ["a.txt", "b.txt"] }, (p) => join(dir, p), () => undefined)).rejects.toMatchObject({
        path: ["files", 1],
        message: expect.stringContaining("b.txt:2: rule '||x.test^$dnstype='") as unknown,
      });
      await expect(loadAdguardIndex({ rules: [], files: ["missing.txt"] }, (p) => join(dir, p), () => undefined)).rejects.toThrow("cannot read rule file 'missing.txt'");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("how rules are indexed (so lookups do not grow with the list)", () => {
  const indexOf = (line: string): Pick<ParsedRule, "index" | "key">[] => {
    const out: ParsedRule[] = [];
    parseAdguardLine(line, out);
    return out.map((r) => ({ index: r.index, key: r.key }));
  };

  test.each([
    ["||ads.example.com^", "suffix", "ads.example.com"],
    ["||Ads.Example.COM^", "suffix", "ads.example.com"],
    ["example.com", "exact", "example.com"],
    ["|example.com^", "exact", "example.com"],
    ["||ad*.example.com^", "suffix", "example.com"],
    ["||*-track.cdn.example.net^", "suffix", "cdn.example.net"],
    ["||ad*.com^", "literal", ".com"],
    ["-adserver-", "literal", "-adserver-"],
    ["||averyveryverylongprefix*", "literal", "rylongprefix"],
    ["/^adserver[0-9]+\\./", "literal", "adserver"],
    ["/(ads|track)\\.example\\.com/", "scan", ""],
    ["*$denyallow=com", "scan", ""],
  ])("%s → %s %s", (line, index, key) => {
    expect(indexOf(line)).toEqual([{ index, key }]);
  });

  test("a regexp's required literal", () => {
    expect(regexpLiteral("^adserver[0-9]+\\.")).toBe("adserver");
    expect(regexpLiteral("^ads?\\.tracker\\.net$")).toBe(".tracker.net");
    expect(regexpLiteral("track(er)?ing\\.example")).toBe("ing.example");
    expect(regexpLiteral("ab{2}cdef")).toBe("cdef");
    expect(regexpLiteral("x+yz")).toBe("yz");
    expect(regexpLiteral("a|b")).toBe("");
    expect(regexpLiteral("\\u0061dserver")).toBe("");
    expect(regexpLiteral("\\dxyz[abc]q")).toBe("xyz");
  });
});

describe("precedence: important exception > important block > exception > block", () => {
  test("an exception beats a block, also from a parent domain", async () => {
    const ix = await index(["||example.org^", "@@||good.example.org^"]);
    expect(ix.blocks("ads.example.org", A)).toBe(true);
    expect(ix.blocks("good.example.org", A)).toBe(false);
    expect(ix.blocks("x.good.example.org", A)).toBe(false);
  });

  test("$important beats an exception; an important exception beats it", async () => {
    const ix = await index(["||a.test^$important", "@@||a.test^", "||b.test^$important", "@@||b.test^$important", "@@/^c\\./", "||c.test^$important"]);
    expect(ix.blocks("a.test", A)).toBe(true);
    expect(ix.blocks("b.test", A)).toBe(false);
    expect(ix.blocks("c.test", A)).toBe(true);
  });

  test("precedence holds across kinds (exact, suffix, mask, regexp)", async () => {
    const ix = await index(["/^x\\.y\\.test$/$important", "@@||y.test^", "@@x.y.test$important", "||*.z.test^", "@@|w.z.test^"]);
    expect(ix.verdict("x.y.test", A)).toBe(4);
    expect(ix.blocks("x.y.test", A)).toBe(false);
    expect(ix.blocks("v.z.test", A)).toBe(true);
    expect(ix.blocks("w.z.test", A)).toBe(false);
  });
});

describe("modifiers", () => {
  test("$badfilter disables the rule with the same text (modifier order does not matter), not others", async () => {
    const ix = await index(["||a.test^", "||a.test^$badfilter", "||b.test^$important,dnstype=A", "||b.test^$dnstype=A,badfilter,important", "@@||c.test^", "||c.test^", "@@||c.test^$badfilter", "||d.test^"]);
    expect(ix.blocks("a.test", A)).toBe(false);
    expect(ix.blocks("b.test", A)).toBe(false);
    expect(ix.blocks("c.test", A)).toBe(true);
    expect(ix.blocks("d.test", A)).toBe(true);
    expect(ix.disabled).toBe(3);
    expect(ix.size).toBe(2);
  });

  test("$denyallow excludes domains and their subdomains", async () => {
    const ix = await index(["||example.org^$denyallow=sub.example.org"]);
    expect(ix.blocks("example.org", A)).toBe(true);
    expect(ix.blocks("x.example.org", A)).toBe(true);
    expect(ix.blocks("sub.example.org", A)).toBe(false);
    expect(ix.blocks("a.sub.example.org", A)).toBe(false);
    expect(ix.blocks("notsub.example.org", A)).toBe(true);
    const all = await index(["*$denyallow=com|net"]);
    expect(all.blocks("anything.io", A)).toBe(true);
    expect(all.blocks("shop.com", A)).toBe(false);
    expect(all.blocks("x.net", A)).toBe(false);
  });

  test("$denyallow on an exception", async () => {
    const ix = await index(["||org^", "@@*$denyallow=bad.org"]);
    expect(ix.blocks("good.org", A)).toBe(false);
    expect(ix.blocks("x.bad.org", A)).toBe(true);
  });

  test("$dnstype applies to questions; a by-name lookup leaves such rules out", async () => {
    const ix = await index(["||v6.test^$dnstype=AAAA", "||notv4.test^$dnstype=~A|~CNAME", "||mixed.test^$dnstype=~A|AAAA", "||all.test^", "@@||all.test^$dnstype=HTTPS"]);
    expect(ix.blocks("v6.test", AAAA)).toBe(true);
    expect(ix.blocks("v6.test", A)).toBe(false);
    expect(ix.blocks("v6.test", -1)).toBe(false);
    expect(ix.blocks("notv4.test", A)).toBe(false);
    expect(ix.blocks("notv4.test", QTYPE.CNAME)).toBe(false);
    expect(ix.blocks("notv4.test", QTYPE.MX)).toBe(true);
    expect(ix.blocks("mixed.test", A)).toBe(false);
    expect(ix.blocks("mixed.test", AAAA)).toBe(true);
    expect(ix.blocks("all.test", A)).toBe(true);
    expect(ix.blocks("all.test", QTYPE.HTTPS)).toBe(false);
    expect(ix.blocks("all.test", -1)).toBe(true);
  });

  test("an empty pattern with modifiers matches every name", async () => {
    const ix = await index(["$dnstype=ANY"]);
    expect(ix.blocks("x.test", QTYPE.ANY)).toBe(true);
    expect(ix.blocks("x.test", A)).toBe(false);
  });
});

describe("unsupported rules are skipped and counted, once per source", () => {
  test("browser-only syntax and modifiers we do not implement", async () => {
    const skipped: SkippedReport[] = [];
    const ix = await index(
      [
        "||ok.test^",
        "||a.test^$client=127.0.0.1",
        "||a.test^$third-party",
        "||b.test^$ctag=device_pc",
        "||c.test^$dnsrewrite=1.2.3.4",
        "example.com##.ad-banner",
        "||example.com/ads/*",
        "||d.test^$~important",
        "https://e.test",
        "e.test f.test",
      ],
      skipped,
    );
    expect(ix.size).toBe(1);
    expect(ix.skipped).toBe(9);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatchObject({ source: "rules", count: 9, first: { line: 2, text: "||a.test^$client=127.0.0.1", reason: "$client" } });
    expect(ix.blocks("a.test", A)).toBe(false);
  });
});

describe("malformed supported rules are errors that quote the rule", () => {
  test.each([
    ["||a.test^$dnstype=BOGUS", "not a DNS type name"],
    ["||a.test^$dnstype=", "needs DNS types"],
    ["/[a-/", "not a valid regular expression"],
    ["||a.test^$important=1", "takes no value"],
    ["||a.test^b^", "may only end the pattern"],
    ["||a|b.test^", "may only start or end"],
    ["||", "no host name pattern"],
    ["@@", "no host name pattern"],
    ["||a.test^$", "empty modifier list"],
    ["||a.test^$denyallow=*.com", "not a plain domain"],
    ["||a.test^$denyallow=", "needs domains"],
    ["||bücher.test^", "punycode"],
    ["0.0.0.0 bad_host!", "not a host name"],
  ])("%s", (rule, message) => {
    expect(() => parseAdguardLine(rule, [])).toThrow(RuleSyntaxError);
    expect(() => parseAdguardLine(rule, [])).toThrow(message);
    expect(adguardInlineProblems(["||fine.test^", rule])).toEqual([{ path: ["rules", 1], message: expect.stringContaining(rule) as unknown }]);
  });

  test("the index build reports the inline item", async () => {
    await expect(index(["||ok.test^", "||x^$dnstype=NOPE"])).rejects.toMatchObject({ path: ["rules", 1] });
  });
});

describe("KeywordAutomaton.forEachMatch", () => {
  test("reports every keyword occurrence, overlapping ones included", () => {
    for (const count of [4, 10, 5000]) {
      const extra = Array.from({ length: count - 4 }, (_, i) => `zz${i}q`);
      const words = ["he", "she", "his", "hers", ...extra];
      const ac = KeywordAutomaton.build(words);
      const seen: string[] = [];
      ac.forEachMatch("ushers", (k) => (seen.push(words[k]), false));
      expect(seen.sort()).toEqual(["he", "hers", "she"]);
      const first: string[] = [];
      expect(ac.forEachMatch("ushers", (k) => (first.push(words[k]), true))).toBe(true);
      expect(first).toHaveLength(1);
      expect(ac.forEachMatch("nothing", () => true)).toBe(false);
    }
  });

  test("dense and map-stepped automata agree with a brute-force search", () => {
    let seed = 7;
    const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    const word = (len: number): string => Array.from({ length: len }, () => "abcdefghij.-0123456789xyz"[rnd(25)]).join("");
    // 60 000 keywords of ~10 characters exceed the dense table's budget; 300 fit in it.
    for (const count of [300, 60_000]) {
      const words = [...new Set(Array.from({ length: count }, () => word(3 + rnd(10))))];
      const ac = KeywordAutomaton.build(words);
      for (let t = 0; t < 300; t++) {
        const text = t % 3 === 0 ? `${word(5)}${words[rnd(words.length)]}${word(5)}` : word(30);
        const brute = words.map((w, i) => (text.includes(w) ? i : -1)).filter((i) => i >= 0);
        const seen = new Set<number>();
        ac.forEachMatch(text, (k) => (seen.add(k), false));
        expect([...seen].sort((a, b) => a - b), text).toEqual(brute);
        expect(ac.firstMatch(text)).toBe(brute.length > 0 ? brute[0] : -1);
      }
    }
  });
});
