// Garbage in: the parser may only ever return sound records or throw its own located ZoneError —
// never crash, never another exception type, never a record our strict decoder would refuse.
import { describe, expect, test } from "vitest";
import { decodeMessage, encodeMessage, type ResourceRecord } from "../../src/dns/message.js";
import { seededRandom } from "../helpers/wire.js";
import { MAX_GENERATED, parseZone, ZoneError } from "../../src/dns/zone/index.js";

const ALPHABET = ' \t\n\n\n\r;()"\\$@.,=#{}-/:0123456789abcdefxyzINAMXTSOPRHVC*\u00e9\u2713\u0000\u007f';

const CORPUS = String.raw`$ORIGIN example.com.
$TTL 1h
@ IN SOA ns1 hostmaster ( 2024010101 2h 1h 1w 300 )
@ NS ns1
  MX 10 mail
www 300 IN A 192.0.2.1
    AAAA 2001:db8::1
txt TXT "hello \"world\"" bare \065
_sip._tcp SRV 10 60 5060 sip
@ CAA 0 issue "ca.example"
@ NAPTR 100 10 "S" "SIP+D2U" "!^.*$!sip:x@example.com!" _sip._udp
h SSHFP 1 1 123456789abcdef67890123456789abcdef67890
_443._tcp TLSA 3 1 1 ( 0011 2233 )
@ DS 1 8 2 00112233
svc HTTPS 1 . alpn="h2,h3" port=443 ipv4hint=192.0.2.1 mandatory=alpn ech=AAAA
old DNAME new.example.
x TYPE65280 \# 2 abcd
$GENERATE 1-3 host$ A 10.0.0.${"$"}{0,1}
$INCLUDE ok.zone sub
`;

const VOCAB = [
  "@", ".", "www", "a.b.", "IN", "CH", "CLASS9", "300", "1h30m", "1x", "A", "AAAA", "MX", "TXT", "SRV", "SOA", "CAA", "NAPTR", "SSHFP", "TLSA",
  "DS", "HTTPS", "SVCB", "TYPE65280", "TYPE1", "ANY", "\\#", "0", "4", "65535", "70000", "192.0.2.1", "::1", "2001:db8::", "abcdef", "c0000201",
  '"q"', '"a;b"', '"\\300"', "(", ")", ";c", "$ORIGIN", "$TTL", "$INCLUDE", "$GENERATE", "ok.zone", "loop.zone", "1-3", "0-10/2", "5-1", "h$",
  "${1,3,x}", "${", "alpn=h2", "port=53", "mandatory=alpn", "key7=", 'alpn="h2,h3"', "ipv4hint=1.2.3.4", "no-default-alpn", "issue", "\\", "x\\.y",
];

function readStub(path: string): string {
  if (path.endsWith("ok.zone")) return "inc A 192.0.2.1\n";
  if (path.endsWith("loop.zone")) return "$INCLUDE loop.zone\n";
  throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
}

type Outcome = "records" | "error";

function feed(text: string): Outcome {
  let records: ResourceRecord[];
  try {
    records = parseZone(text, { origin: "example.com", baseDir: "/virtual", readFile: readStub });
  } catch (err) {
    if (!(err instanceof ZoneError)) throw new Error(`non-ZoneError for ${JSON.stringify(text)}: ${String(err)}`, { cause: err });
    expect(err.detail, JSON.stringify(text)).not.toMatch(/^unexpected error/);
    expect(err.line).toBeGreaterThanOrEqual(1);
    expect(err.line).toBeLessThanOrEqual(text.split("\n").length + 1);
    return "error";
  }
  for (const rr of records) {
    const wire = encodeMessage({ id: 1, flags: 0x8000, questions: [], answers: [rr], authorities: [], additionals: [], edns: null });
    const back = decodeMessage(wire).answers[0];
    expect(back.data.equals(rr.data), JSON.stringify(text)).toBe(true);
  }
  return "records";
}

function pick<T>(r: () => number, list: readonly T[]): T {
  return list[Math.floor(r() * list.length)];
}

function soup(r: () => number): string {
  let s = "";
  const n = Math.floor(r() * 300);
  for (let i = 0; i < n; i++) s += pick(r, [...ALPHABET]);
  return s;
}

function mutate(r: () => number): string {
  let s = CORPUS;
  const edits = 1 + Math.floor(r() * 6);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(r() * s.length);
    const len = 1 + Math.floor(r() * 12);
    switch (Math.floor(r() * 4)) {
      case 0:
        s = s.slice(0, at) + s.slice(at + len);
        break;
      case 1:
        s = s.slice(0, at) + soup(r).slice(0, len) + s.slice(at);
        break;
      case 2:
        s = s.slice(0, at) + pick(r, [...ALPHABET]) + s.slice(at + 1);
        break;
      default:
        s = s.slice(0, at) + s.slice(at, at + len * 4) + s.slice(at);
    }
  }
  return s;
}

function tokens(r: () => number): string {
  const lines: string[] = [];
  const n = 1 + Math.floor(r() * 6);
  for (let i = 0; i < n; i++) {
    const words: string[] = [];
    const k = Math.floor(r() * 9);
    for (let j = 0; j < k; j++) words.push(pick(r, VOCAB));
    lines.push((r() < 0.3 ? "  " : "") + words.join(r() < 0.9 ? " " : ""));
  }
  return lines.join("\n");
}

describe("random and garbage input only ever yields records or a located ZoneError", () => {
  test.each([
    ["character soup", soup, 11],
    ["mutated zone", mutate, 22],
    ["token soup", tokens, 33],
  ] as const)("%s (300 inputs)", (_name, make, seed) => {
    const r = seededRandom(seed);
    const outcomes: Record<Outcome, number> = { records: 0, error: 0 };
    for (let i = 0; i < 300; i++) outcomes[feed(make(r))]++;
    // Both paths must be exercised, or the generator is not testing anything.
    expect(outcomes.error).toBeGreaterThan(0);
    if (make !== soup) expect(outcomes.records).toBeGreaterThan(0);
  });

  test("the unmutated corpus parses", () => {
    expect(feed(CORPUS)).toBe("records");
  });

  test.each([
    ["deep parentheses", "(".repeat(100_000)],
    ["only closing parentheses", ")".repeat(1000)],
    ["quotes", '"'.repeat(100_001)],
    ["backslashes", "\\".repeat(100_001)],
    ["a long name", `${"a.".repeat(50_000)} A 192.0.2.1`],
    ["nul bytes", "www\u0000 A 192.0.2.1"],
    ["lone surrogate", 'x TXT "\ud800"'],
    ["a huge TXT", `x TXT ${"yy ".repeat(30_000)}`],
    ["include cycle", "$INCLUDE loop.zone"],
    ["missing include", "$INCLUDE nothing.zone"],
  ])("%s", (_name, text) => {
    expect(["records", "error"]).toContain(feed(text));
  });

  test(`$GENERATE at its ${MAX_GENERATED}-record limit still works`, () => {
    const records = parseZone(`$GENERATE 0-${MAX_GENERATED - 1} h$.example. TXT x`);
    expect(records).toHaveLength(MAX_GENERATED);
  });
});
