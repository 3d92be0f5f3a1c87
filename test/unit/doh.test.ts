// The DoH request details that must be exact: the `dns` parameter is validated before decoding
// (Buffer.from skips characters it does not know), forwarding header entries name the client only
// in the forms listed, and the cache lifetime is the smallest TTL, an SOA's MINIMUM included.
import { expect, test } from "vitest";
import { encodeMessage } from "../../src/dns/message.js";
import { freshnessTtl } from "../../src/dns/view.js";
import { decodeDnsParam, parseClientEntry } from "../../src/plugins/servers/doh.js";
import { buildQuery } from "../helpers/dns.js";

test("the dns parameter is base64url without padding; anything else is refused, not skipped", () => {
  const q = buildQuery("example.com", "A", { id: 0 });
  expect(decodeDnsParam(q.toString("base64url"))).toEqual(q);
  // Padding that completes the text is tolerated.
  const padded = q.toString("base64");
  expect(decodeDnsParam(padded.replaceAll("+", "-").replaceAll("/", "_"))).toEqual(q);
  for (const bad of ["", "A", "AAAAA", "AA=A", "AAA==", "AA===", "ab+c", "ab/c", "ab.c", "ab%3D", "a b", "AAAA*"]) expect(decodeDnsParam(bad), bad).toBeNull();
  expect(decodeDnsParam("A".repeat(87_384))).toBeNull();
});

test("an entry of a forwarding header names the client as ip, ip:port, [v6] or [v6]:port", () => {
  expect(parseClientEntry("192.0.2.9")).toEqual({ ip: "192.0.2.9", port: null });
  expect(parseClientEntry(" 192.0.2.9:5353 ")).toEqual({ ip: "192.0.2.9", port: 5353 });
  expect(parseClientEntry("2001:db8::9")).toEqual({ ip: "2001:db8::9", port: null });
  expect(parseClientEntry("[2001:db8::9]:443")).toEqual({ ip: "2001:db8::9", port: 443 });
  expect(parseClientEntry("[2001:db8::9]")).toEqual({ ip: "2001:db8::9", port: null });
  for (const bad of ["", "unknown", "192.0.2.9:99999", "[192.0.2.9]:1", "[2001:db8::9", "[2001:db8::9]x", "host.example:80", "192.0.2.300"]) {
    expect(parseClientEntry(bad), bad).toBeNull();
  }
});

test("the freshness lifetime is the smallest TTL of answer and authority records, an SOA's MINIMUM included", () => {
  const msg = (answers: { ttl: number; type: number; data: Buffer }[], authorities: typeof answers = []): Buffer =>
    encodeMessage({
      id: 1,
      flags: 0x8180,
      questions: [{ name: "a.test", type: 1, class: 1 }],
      answers: answers.map((a) => ({ name: "a.test", class: 1, ...a })),
      authorities: authorities.map((a) => ({ name: "test", class: 1, ...a })),
      additionals: [],
      edns: { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: [] },
    });
  const a = (ttl: number) => ({ ttl, type: 1, data: Buffer.from([192, 0, 2, 1]) });
  const soa = (ttl: number, minimum: number) => {
    const names = Buffer.from([2, 110, 115, 0, 1, 104, 0]);
    const timers = Buffer.alloc(20);
    timers.writeUInt32BE(minimum, 16);
    return { ttl, type: 6, data: Buffer.concat([names, timers]) };
  };
  expect(freshnessTtl(msg([a(300), a(60)]))).toBe(60);
  expect(freshnessTtl(msg([], [soa(3600, 120)]))).toBe(120);
  expect(freshnessTtl(msg([], [soa(30, 120)]))).toBe(30);
  expect(freshnessTtl(msg([]))).toBe(-1);
  expect(freshnessTtl(Buffer.alloc(5))).toBe(-1);
});
