import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { reverseNameToIp } from "../../src/engine/rules/reverse-name.js";
import { loadRuleFile, loadRuleTokens, parseRuleList, splitFields, splitRules } from "../../src/engine/rules/source.js";
import { formatIP } from "../../src/dns/ip.js";
import { ArgError } from "../../src/engine/plugin-args.js";

const dir = mkdtempSync(join(tmpdir(), "sluice-rules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe("splitRules", () => {
  test("splits on commas and whitespace", () => {
    expect(splitRules("a.com, b.com\tc.com  ,d.com")).toEqual(["a.com", "b.com", "c.com", "d.com"]);
    expect(splitRules("  ")).toEqual([]);
  });

  test("a regexp: token keeps the rest of the item, spaces and commas included", () => {
    expect(splitRules("domain:a.com regexp:^(ads|trk)\\.[a-z]{2,3}$")).toEqual(["domain:a.com", "regexp:^(ads|trk)\\.[a-z]{2,3}$"]);
    expect(splitRules("regexp:^a b$  ")).toEqual(["regexp:^a b$"]);
    expect(splitRules("keyword:regexp:x")).toEqual(["keyword:regexp:x"]);
  });

  test("with comments on, a token starting with # ends the line", () => {
    expect(splitRules("a.com b.com # the rest", true)).toEqual(["a.com", "b.com"]);
    expect(splitRules("# whole line", true)).toEqual([]);
    expect(splitRules("a.com #x", false)).toEqual(["a.com", "#x"]);
  });

  test("splitFields splits on whitespace only", () => {
    expect(splitFields("full:a.com 1.2.3.4,5.6.7.8  ::1 # c")).toEqual(["full:a.com", "1.2.3.4,5.6.7.8", "::1"]);
  });
});

describe("parseRuleList", () => {
  test("classifies providers, files and inline rules, locating each by item", () => {
    expect(parseRuleList(["$ads &lists/a.txt", "domain:x.com"])).toEqual([
      { kind: "provider", tag: "ads", at: [0] },
      { kind: "file", path: "lists/a.txt", at: [0] },
      { kind: "rule", text: "domain:x.com", at: [1] },
    ]);
    expect(parseRuleList("full:a.com", ["exps"])).toEqual([{ kind: "rule", text: "full:a.com", at: ["exps"] }]);
    expect(parseRuleList(undefined)).toEqual([]);
  });

  test("rejects bad references, and references where they are not allowed", () => {
    expect(() => parseRuleList(["ok.com", "$"])).toThrow(/'\$' is not a valid \$tag reference/);
    expect(() => parseRuleList(["&"])).toThrow(/needs a file path/);
    expect(() => parseRuleList(["$x"], ["exps"], false)).toThrow(/go in 'sets'/);
    expect(() => parseRuleList(["&f"], ["exps"], false)).toThrow(/go in 'files'/);
    let caught: unknown = null;
    try {
      parseRuleList(["ok.com", "$a/b"]);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ArgError);
    expect((caught as ArgError).path).toEqual([1]);
  });
});

describe("rule files", () => {
  test("comments, blank lines, CRLF, a BOM and several rules per line", async () => {
    const p = file("ok.txt", "\ufeff# header\r\n\r\na.com b.com\r\n   \n  # indented comment\nc.com # trailing\nregexp:^x y$\n");
    const got: string[] = [];
    await loadRuleFile(p, "ok.txt", ["files", 0], (r) => got.push(r));
    expect(got).toEqual(["a.com", "b.com", "c.com", "regexp:^x y$"]);
  });

  test("a bad line is reported with the file name and line number", async () => {
    const p = file("bad.txt", "good.com\n# c\nfull:\n");
    const err = await loadRuleFile(p, "lists/bad.txt", ["files", 2], (r) => {
      if (r === "full:") throw new Error("rule 'full:' has an empty domain");
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArgError);
    expect((err as ArgError).message).toBe("lists/bad.txt:3: rule 'full:' has an empty domain");
    expect((err as ArgError).path).toEqual(["files", 2]);
  });

  test("references inside a file are refused", async () => {
    const p = file("ref.txt", "a.com\n$other\n");
    await expect(loadRuleFile(p, "ref.txt", [], () => undefined)).rejects.toThrow(/ref.txt:2: '\$other': provider references and file includes are not allowed/);
  });

  test("a missing file is an ArgError naming it", async () => {
    await expect(loadRuleFile(join(dir, "nope.txt"), "nope.txt", [0], () => undefined)).rejects.toThrow(/cannot read rule file 'nope.txt'/);
  });

  test("loadRuleTokens adds inline and file rules in list order and returns the providers", async () => {
    file("list.txt", "f1.com\nf2.com\n");
    const got: string[] = [];
    const refs = await loadRuleTokens(parseRuleList(["a.com &list.txt $p1", "b.com $p2"]), (p) => join(dir, p), (r) => got.push(r));
    expect(got).toEqual(["a.com", "f1.com", "f2.com", "b.com"]);
    expect(refs.map((r) => r.tag)).toEqual(["p1", "p2"]);
  });

  test("an inline rule error is located at its item", async () => {
    const err = await loadRuleTokens(parseRuleList(["a.com", "bad"]), (p) => p, (r) => {
      if (r === "bad") throw new Error("nope");
    }).catch((e: unknown) => e);
    expect((err as ArgError).path).toEqual([1]);
  });
});

describe("reverse names", () => {
  const ip = (name: string): string | null => {
    const b = reverseNameToIp(name);
    return b ? formatIP(b) : null;
  };
  test("in-addr.arpa", () => {
    expect(ip("4.3.2.1.in-addr.arpa")).toBe("1.2.3.4");
    expect(ip("255.0.0.10.in-addr.arpa")).toBe("10.0.0.255");
    for (const bad of ["3.2.1.in-addr.arpa", "5.4.3.2.1.in-addr.arpa", "256.3.2.1.in-addr.arpa", "04.3.2.1.in-addr.arpa", "x.3.2.1.in-addr.arpa"]) expect(ip(bad)).toBeNull();
  });
  test("ip6.arpa", () => {
    const name = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa";
    expect(ip(name)).toBe("2001:db8::1");
    expect(ip("b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa")).toBe("4321:0:1:2:3:4:567:89ab");
    expect(ip("8.b.d.0.1.0.0.2.ip6.arpa")).toBeNull();
    expect(ip(name.replace("8.b", "8.g"))).toBeNull();
    expect(ip("example.com")).toBeNull();
  });
});
