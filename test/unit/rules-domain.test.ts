import { describe, expect, test } from "vitest";
import { DomainTable, DomainTableBuilder, parseDomainRule, RuleSyntaxError } from "../../src/engine/rules/domain.js";
import { KeywordAutomaton } from "../../src/engine/rules/keywords.js";

function table<V>(rules: [string, V][], bare: "full" | "domain" = "domain"): DomainTable<V> {
  const b = new DomainTableBuilder<V>(bare);
  for (const [r, v] of rules) b.add(r, v);
  return b.build();
}

describe("rule kinds", () => {
  test("full: matches only the exact name", () => {
    const t = table([["full:example.com", 1]]);
    expect(t.lookup("example.com")).toBe(1);
    expect(t.has("www.example.com")).toBe(false);
    expect(t.has("example.co")).toBe(false);
  });

  test("domain: matches the name and every subdomain, on label boundaries only", () => {
    const t = table([["domain:example.com", 1]]);
    expect(t.has("example.com")).toBe(true);
    expect(t.has("www.example.com")).toBe(true);
    expect(t.has("a.b.c.example.com")).toBe(true);
    expect(t.has("badexample.com")).toBe(false);
    expect(t.has("com")).toBe(false);
    expect(t.has("example.com.evil")).toBe(false);
  });

  test("an escaped dot is not a label boundary", () => {
    const t = table([["domain:b.example.com", 1], ["domain:example.com", 2]]);
    expect(t.lookup("a\\.b.example.com")).toBe(2);
    expect(t.lookup("a.b.example.com")).toBe(1);
  });

  test("keyword: matches a substring anywhere", () => {
    const t = table([["keyword:ads", 1], ["keyword:track", 2]]);
    expect(t.lookup("ads.example.com")).toBe(1);
    expect(t.lookup("myadserver.net")).toBe(1);
    expect(t.lookup("x.tracker.io")).toBe(2);
    expect(t.has("example.com")).toBe(false);
  });

  test("regexp: matches case-insensitively, tested in declaration order", () => {
    const t = table([["regexp:^Cdn[0-9]+\\.", 1], ["regexp:\\.example\\.com$", 2], ["regexp:^cdn", 3]]);
    expect(t.lookup("cdn12.example.com")).toBe(1);
    expect(t.lookup("www.example.com")).toBe(2);
    expect(t.lookup("cdnx.org")).toBe(3);
    expect(t.has("example.org")).toBe(false);
  });

  test("an unprefixed rule is domain: or full: as the table was told", () => {
    expect(table([["example.com", 1]], "domain").has("www.example.com")).toBe(true);
    expect(table([["example.com", 1]], "full").has("www.example.com")).toBe(false);
    expect(table([["example.com", 1]], "full").has("example.com")).toBe(true);
  });
});

describe("priority and repeats", () => {
  test("full beats domain beats regexp beats keyword", () => {
    const t = table([
      ["keyword:example", "keyword"],
      ["regexp:example", "regexp"],
      ["domain:example.com", "domain"],
      ["full:www.example.com", "full"],
    ]);
    expect(t.lookup("www.example.com")).toBe("full");
    expect(t.lookup("mail.example.com")).toBe("domain");
    expect(t.lookup("example.org")).toBe("regexp");
    const k = table([["keyword:example", "keyword"], ["domain:other.com", "domain"]]);
    expect(k.lookup("example.org")).toBe("keyword");
  });

  test("the longest matching domain suffix wins", () => {
    const t = table([["domain:com", "tld"], ["domain:example.com", "site"], ["domain:www.example.com", "host"]]);
    expect(t.lookup("a.www.example.com")).toBe("host");
    expect(t.lookup("www.example.com")).toBe("host");
    expect(t.lookup("mail.example.com")).toBe("site");
    expect(t.lookup("other.com")).toBe("tld");
  });

  test("the earliest-declared keyword wins when several occur", () => {
    const t = table([["keyword:zz", 1], ["keyword:ab", 2], ["keyword:b", 3]]);
    expect(t.lookup("ab.zz.com")).toBe(1);
    expect(t.lookup("ab.com")).toBe(2);
    expect(t.lookup("b.com")).toBe(3);
  });

  test("a repeated pattern takes its last definition", () => {
    const t = table([
      ["full:a.com", 1],
      ["full:A.com.", 2],
      ["domain:b.com", 1],
      ["b.com", 2],
      ["keyword:kw", 1],
      ["keyword:other", 9],
      ["keyword:KW", 2],
      ["regexp:^r", 1],
      ["regexp:^s", 9],
      ["regexp:^r", 2],
    ]);
    expect(t.lookup("a.com")).toBe(2);
    expect(t.lookup("x.b.com")).toBe(2);
    expect(t.lookup("kwother.net")).toBe(2); // keeps its first position, ahead of "other"
    expect(t.lookup("rs.net")).toBe(2);
    expect(t.size).toBe(6);
  });
});

describe("normalisation", () => {
  test("rules are lower-cased and lose a trailing dot; kind prefixes are case-insensitive", () => {
    const t = table([["Domain:Example.COM.", 1], ["FULL:Host.Example.ORG.", 2], ["keyword:ADS", 3]]);
    expect(t.lookup("www.example.com")).toBe(1);
    expect(t.lookup("host.example.org")).toBe(2);
    expect(t.lookup("myads.net")).toBe(3);
  });

  test("a keyword keeps its trailing dot (it is part of the substring)", () => {
    const t = table([["keyword:ads.", 1]]);
    expect(t.has("ads.example.com")).toBe(true);
    expect(t.has("example.ads")).toBe(false);
  });
});

describe("bad rules", () => {
  const bad: [string, RegExp][] = [
    ["domian:example.com", /unknown kind 'domian:'/],
    ["full:", /empty domain/],
    ["domain:.", /empty domain/],
    ["domain:a..b.com", /empty label/],
    ["full:.a.com", /empty label/],
    ["keyword:", /empty keyword/],
    ["regexp:", /empty regular expression/],
    ["regexp:(unclosed", /'regexp:\(unclosed' is not a valid regular expression/],
    ["domain:bücher.de", /punycode/],
    [`full:${"a.".repeat(130)}com`, /longer than a domain name/],
  ];
  for (const [rule, message] of bad) {
    test(`'${rule.slice(0, 40)}' is rejected`, () => {
      expect(() => parseDomainRule(rule, "domain")).toThrow(RuleSyntaxError);
      expect(() => new DomainTableBuilder<number>("domain").add(rule, 1)).toThrow(message);
    });
  }
});

test("an empty table matches nothing", () => {
  const t = DomainTable.empty<number>();
  expect(t.size).toBe(0);
  expect(t.lookup("example.com")).toBeUndefined();
  expect(t.has("")).toBe(false);
});

test("lookup and has agree on a large mixed table", () => {
  const b = new DomainTableBuilder<number>("domain");
  for (let i = 0; i < 5000; i++) {
    b.add(`full:host${i}.full.test`, i);
    b.add(`domain:zone${i}.test`, i);
  }
  b.add("keyword:needle", -1);
  const t = b.build();
  expect(t.size).toBe(10001);
  expect(t.lookup("host4999.full.test")).toBe(4999);
  expect(t.lookup("deep.inside.zone2500.test")).toBe(2500);
  expect(t.lookup("a-needle-b.example")).toBe(-1);
  for (const name of ["host1.full.test", "x.zone7.test", "needle", "nothing.here", "zone5000.test"]) {
    expect(t.has(name)).toBe(t.lookup(name) !== undefined);
  }
  expect(t.has("zone5000.test")).toBe(false);
});

describe("keyword automaton", () => {
  // Deterministic pseudo-random strings over a tiny alphabet, so keywords overlap a lot.
  let seed = 12345;
  const rand = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const word = (min: number, max: number): string => {
    let s = "";
    const len = min + rand(max - min + 1);
    for (let i = 0; i < len; i++) s += "ab.c"[rand(4)];
    return s;
  };

  test("finds the same earliest-declared keyword as a naive scan", () => {
    for (let round = 0; round < 50; round++) {
      const keywords = Array.from({ length: 1 + rand(12) }, () => word(1, 4));
      const ac = KeywordAutomaton.build(keywords);
      for (let q = 0; q < 40; q++) {
        const text = word(0, 16);
        const naive = keywords.findIndex((k) => text.includes(k));
        expect(ac.firstMatch(text), `${JSON.stringify(keywords)} in '${text}'`).toBe(naive);
        expect(ac.test(text)).toBe(naive >= 0);
      }
    }
  });

  test("a set too big for the dense table (sparse transitions) agrees with a naive scan too", () => {
    // 6 000 distinct 6-letter keywords: well over 4 096 trie states, so the sparse path is used.
    const letters = "abcdefghij";
    const keywords = Array.from({ length: 6000 }, (_, i) => {
      let w = "";
      for (let n = i * 7919 + 12345, j = 0; j < 6; j++, n = Math.floor(n / 10)) w += letters[n % 10];
      return w;
    });
    const ac = KeywordAutomaton.build(keywords);
    for (let q = 0; q < 300; q++) {
      let text = "";
      for (let j = 0; j < 5 + rand(20); j++) text += letters[rand(10)];
      if (q % 3 === 0) text = text.slice(0, 3) + keywords[rand(keywords.length)] + text.slice(3);
      const naive = keywords.findIndex((k) => text.includes(k));
      expect(ac.firstMatch(text), text).toBe(naive);
      expect(ac.test(text)).toBe(naive >= 0);
    }
  });

  test("characters outside ASCII never match and reset the scan", () => {
    const ac = KeywordAutomaton.build(["ab", "ba", "abc", "cab", "bca"]);
    expect(ac.test("a\u00e9b")).toBe(false);
    expect(ac.test("\u00e9ab")).toBe(true);
  });
});
