// Which client a forwarding header names once a trusted proxy sent it: the entries are read from
// the right (each proxy appends the peer it saw), skipping trusted proxies; the first other entry
// is the client, whatever the client itself wrote further left.
import { expect, test } from "vitest";
import { IpPrefixSetBuilder } from "../../src/engine/rules/ip.js";
import { clientFromHeader } from "../../src/plugins/servers/doh.js";

const trusted = (...rules: string[]) => {
  const b = new IpPrefixSetBuilder();
  for (const r of rules) b.add(r);
  return b.build();
};

test("the right-most entry that is not a trusted proxy is the client", () => {
  const proxies = trusted("127.0.0.0/8", "10.0.0.0/8", "::1");
  expect(clientFromHeader("192.0.2.9", proxies)).toEqual({ ip: "192.0.2.9", port: null });
  // A client writing its own header first: the entry the proxy appended wins.
  expect(clientFromHeader("203.0.113.66, 192.0.2.9", proxies)).toEqual({ ip: "192.0.2.9", port: null });
  // Hops through trusted proxies are skipped.
  expect(clientFromHeader("203.0.113.66, 192.0.2.9:5353, 10.1.1.1 ,127.0.0.5", proxies)).toEqual({ ip: "192.0.2.9", port: 5353 });
  expect(clientFromHeader("[2001:db8::9]:443, ::1", proxies)).toEqual({ ip: "2001:db8::9", port: 443 });
  // Every entry a trusted proxy: the left-most.
  expect(clientFromHeader("10.0.0.7, 127.0.0.1", proxies)).toEqual({ ip: "10.0.0.7", port: null });
  // Garbage left of the client is never looked at; garbage reached means no client from the header.
  expect(clientFromHeader("unknown, 192.0.2.9", proxies)).toEqual({ ip: "192.0.2.9", port: null });
  for (const bad of ["", "unknown", "192.0.2.9, junk", "192.0.2.9, 10.0.0.1, ", "junk, 10.0.0.1"]) expect(clientFromHeader(bad, proxies), bad).toBeNull();
  // A chain of trusted entries longer than 32 is given up.
  expect(clientFromHeader(Array.from({ length: 40 }, () => "10.0.0.1").join(","), proxies)).toBeNull();
});
