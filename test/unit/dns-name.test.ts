import { describe, expect, test } from "vitest";
import { checkName, fqdn, nameToLabels, normalizeName, readName, skipName, WireFormatError } from "../../src/dns/name.js";
import { WireWriter } from "../../src/dns/writer.js";
import { PacketBuilder, randInt, seededRandom } from "../helpers/wire.js";

/** Name bytes starting at offset 12 (after a header) so pointers can reach back into a real header. */
function nameAt12(fill: (b: PacketBuilder) => void): Buffer {
  const b = new PacketBuilder();
  fill(b);
  return b.build();
}

function labelsText(labels: Uint8Array[]): string[] {
  return labels.map((l) => Buffer.from(l).toString("latin1"));
}

describe("readName", () => {
  test("reads plain and compressed names and reports the end after the first pointer", () => {
    const b = new PacketBuilder();
    b.name(["www", "example", "com"]); // at 12
    const second = b.here;
    b.name(["mail"], 16); // "mail" + pointer to "example.com"
    const buf = b.build();
    expect(readName(buf, 12)).toEqual({ name: "www.example.com", end: second });
    expect(readName(buf, second)).toEqual({ name: "mail.example.com", end: buf.length });
    expect(skipName(buf, 12)).toBe(second);
    expect(skipName(buf, second)).toBe(buf.length);
  });

  test("the root name is the empty string", () => {
    const buf = nameAt12((b) => b.u8(0));
    expect(readName(buf, 12)).toEqual({ name: "", end: 13 });
  });

  test("rejects reserved label types 0x40 and 0x80 (so also a 'length' of 64)", () => {
    for (const first of [0x40, 0x41, 0x7f, 0x80, 0xbf]) {
      const buf = nameAt12((b) => b.u8(first).bytes(new Array<number>(70).fill(0x61)).u8(0));
      expect(() => readName(buf, 12)).toThrow(/reserved label type/);
      expect(() => skipName(buf, 12)).toThrow(/reserved label type/);
    }
  });

  test("accepts a 255-byte name and rejects a 256-byte one, also when the length builds up across pointers", () => {
    const label = (n: number): string => "a".repeat(n);
    const ok = nameAt12((b) => b.name([label(63), label(63), label(63), label(61)]));
    expect(readName(ok, 12).name.length).toBe(63 * 3 + 61 + 3);
    const long = nameAt12((b) => b.name([label(63), label(63), label(63), label(62)]));
    expect(() => readName(long, 12)).toThrow(/longer than 255/);
    expect(() => skipName(long, 12)).toThrow(/longer than 255/);
    // 3 labels written at 12, then a name adding a 62-byte label in front of a pointer to them.
    const b = new PacketBuilder();
    b.name([label(63), label(63), label(63)]);
    const at = b.here;
    b.name([label(62)], 12);
    const viaPointer = b.build();
    expect(() => readName(viaPointer, at)).toThrow(/longer than 255/);
    expect(() => skipName(viaPointer, at)).toThrow(/longer than 255/);
  });

  test("rejects a pointer to itself, forward pointers and loops", () => {
    const self = nameAt12((b) => b.pointer(12));
    expect(() => readName(self, 12)).toThrow(/does not point backwards/);
    const forward = nameAt12((b) => b.pointer(14).name(["a"]));
    expect(() => readName(forward, 12)).toThrow(/does not point backwards/);
    // "a" then a pointer back to the start of the same name: a loop.
    const loop = nameAt12((b) => b.name(["a"], 12));
    expect(() => readName(loop, 12)).toThrow(/does not point backwards/);
    expect(() => skipName(loop, 12)).toThrow(/does not point backwards/);
    // Two names pointing at each other: 12 → 20 is forward already.
    const pair = nameAt12((b) => b.name(["x"], 20).u16(0).u16(0).pointer(12));
    expect(() => readName(pair, 20)).toThrow(/does not point backwards/);
    // A backwards pointer whose target then jumps forward again past the start.
    const b = new PacketBuilder();
    b.pointer(16).u16(0).name(["y"]); // 12: ptr→16 (forward from 12's view)
    const later = b.here;
    b.pointer(12);
    expect(() => readName(b.build(), later)).toThrow(/does not point backwards/);
  });

  test("rejects names that run past the end or past the record limit", () => {
    expect(() => readName(nameAt12((b) => b.u8(5).bytes([0x61, 0x62])), 12)).toThrow(/past the end/);
    expect(() => readName(nameAt12((b) => b.u8(1).u8(0x61)), 12)).toThrow(/past the end/);
    expect(() => readName(nameAt12((b) => b.u8(0xc0)), 12)).toThrow(/truncated compression pointer/);
    expect(() => skipName(nameAt12((b) => b.u8(0xc0)), 12)).toThrow(/truncated compression pointer/);
    const buf = nameAt12((b) => b.name(["abc", "de"]));
    expect(() => readName(buf, 12, 16)).toThrow(/past the end/);
    expect(() => skipName(buf, 12, 16)).toThrow(/past the end/);
    expect(readName(buf, 12, buf.length).name).toBe("abc.de");
  });

  test("escapes dots, backslashes and unprintable bytes, and the text encodes back to the same bytes", () => {
    const raw = [0x61, 0x2e, 0x5c, 0x00, 0x20, 0x7f, 0xff, 0x41];
    const buf = nameAt12((b) => b.name([raw, "Com"]));
    const { name } = readName(buf, 12);
    expect(name).toBe("a\\.\\\\\\000\\032\\127\\255A.Com");
    const labels = nameToLabels(name);
    expect(labels.map((l) => [...l])).toEqual([raw, [0x43, 0x6f, 0x6d]]);
  });

  test("random label bytes always survive read → text → labels", () => {
    const rnd = seededRandom(0x5eed);
    const w = new WireWriter();
    for (let i = 0; i < 500; i++) {
      const labels: number[][] = [];
      let total = 1;
      for (let n = randInt(rnd, 0, 4); n > 0; n--) {
        const len = randInt(rnd, 1, 40);
        if (total + len + 1 > 255) break;
        labels.push(Array.from({ length: len }, () => randInt(rnd, 0, 255)));
        total += len + 1;
      }
      const buf = nameAt12((b) => b.name(labels));
      const { name } = readName(buf, 12);
      expect(nameToLabels(name).map((l) => [...l])).toEqual(labels);
      w.reset(false);
      w.name(name);
      expect(w.finish()).toEqual(buf.subarray(12));
    }
  });
});

describe("nameToLabels and friends", () => {
  test("plain names, trailing dot and the root", () => {
    expect(labelsText(nameToLabels("www.example.com"))).toEqual(["www", "example", "com"]);
    expect(labelsText(nameToLabels("www.example.com."))).toEqual(["www", "example", "com"]);
    expect(nameToLabels("")).toEqual([]);
    expect(nameToLabels(".")).toEqual([]);
  });

  test("escapes: \\. keeps a dot inside a label, \\\\ a backslash, \\DDD any byte", () => {
    expect(labelsText(nameToLabels("a\\.b.c"))).toEqual(["a.b", "c"]);
    expect(labelsText(nameToLabels("a\\\\b.c"))).toEqual(["a\\b", "c"]);
    expect(nameToLabels("\\000\\255\\065").map((l) => [...l])).toEqual([[0, 255, 65]]);
    // A label ending in an escaped dot is not a trailing dot...
    expect(labelsText(nameToLabels("x.a\\."))).toEqual(["x", "a."]);
    // ...but a dot after an escaped backslash is one.
    expect(labelsText(nameToLabels("a\\\\."))).toEqual(["a\\"]);
    expect(labelsText(nameToLabels("a\\\\\\\\."))).toEqual(["a\\\\"]);
  });

  test("rejects empty labels, long labels, long names, bad escapes and non-latin1 text", () => {
    for (const bad of ["a..b", ".a", "a.b..", "\\256", "abc\\", "a".repeat(64), "日本.example", "é.日本", "x\\.日本"]) {
      expect(() => nameToLabels(bad), bad).toThrow(WireFormatError);
      expect(checkName(bad), bad).not.toBeNull();
    }
    const longName = Array.from({ length: 4 }, () => "b".repeat(63)).join("."); // 4*64+1 = 257
    expect(() => nameToLabels(longName)).toThrow(/longer than 255/);
    const maxName = ["c".repeat(63), "c".repeat(63), "c".repeat(63), "c".repeat(61)].join(".");
    expect(nameToLabels(maxName)).toHaveLength(4);
    expect(checkName(maxName)).toBeNull();
    // Latin-1 characters (one byte each) are fine.
    expect([...nameToLabels("é")[0]]).toEqual([0xe9]);
  });

  test("normalizeName lower-cases and drops only an unescaped trailing dot", () => {
    expect(normalizeName("WWW.Example.COM.")).toBe("www.example.com");
    expect(normalizeName("a\\.")).toBe("a\\.");
    expect(normalizeName("A\\\\.")).toBe("a\\\\");
    expect(normalizeName("")).toBe("");
  });

  test("fqdn adds the dot unless an unescaped one is there", () => {
    expect(fqdn("")).toBe(".");
    expect(fqdn("example.com")).toBe("example.com.");
    expect(fqdn("example.com.")).toBe("example.com.");
    expect(fqdn("a\\.")).toBe("a\\..");
    expect(fqdn("a\\\\.")).toBe("a\\\\.");
    expect(labelsText(nameToLabels(fqdn("a\\.")))).toEqual(["a."]);
  });
});
