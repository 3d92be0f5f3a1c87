// The TOML subset pihole.toml is written in: what it reads, and the line it names for what it refuses.

import { describe, expect, it } from "vitest";
import { parseToml } from "../../src/import/toml.js";

describe("parseToml", () => {
  it("reads tables, nested headers, strings, numbers, booleans, arrays and inline tables", () => {
    const doc = parseToml(`# comment
title = "Pi-hole" # trailing comment
[dns]
  upstreams = [
    "8.8.8.8", # first
    '127.0.0.1#5335',
  ] ### CHANGED, default = []
  port = 53
  ratio = -1.5e3
  big = 1_000
  hex = 0xff
  on = true
  off = false
  "quoted key" = "tab\\there \\u00e9"
  empty = []
  nested = [[1, 2], ["a"]]
  point = { x = 1, y = "two" }
  [dns.cache]
    size = 10000
[misc]
`);
    expect(doc).toEqual({
      title: "Pi-hole",
      dns: {
        upstreams: ["8.8.8.8", "127.0.0.1#5335"],
        port: 53,
        ratio: -1500,
        big: 1000,
        hex: 255,
        on: true,
        off: false,
        "quoted key": "tab\there é",
        empty: [],
        nested: [[1, 2], ["a"]],
        point: { x: 1, y: "two" },
        cache: { size: 10000 },
      },
      misc: {},
    });
  });

  it.each([
    ["a = 1\na = 2\n", "line 2: 'a' is defined twice"],
    ["[t]\n[t]\n", "line 2: table [t] is defined twice"],
    ["a = [1, 2\nb = 3\n", "line 2: expected ',' or ']' in an array, found 'b'"],
    ['a = "open\n', "line 1: unterminated string"],
    ["a = 1979-05-27\n", "line 1: '1979-05-27' is not a value this reader takes"],
    ["a.b = 1\n", "line 1: dotted keys are not supported"],
    ["[[t]]\n", "line 1: arrays of tables are not supported"],
    ['a = """x"""\n', "line 1: multi-line strings are not supported"],
    ["a = 1 2\n", "line 1: unexpected '2' after the value"],
    ["a = 1\n[a]\n", "line 2: 'a' is not a table"],
    ['a = "\\q"\n', "line 1: unknown escape '\\q'"],
  ])("refuses %j", (text, message) => {
    expect(() => parseToml(text)).toThrow(message);
  });
});
