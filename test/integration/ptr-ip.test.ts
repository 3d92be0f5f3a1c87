// `ptr_ip` seen from a client: PTR questions for in-addr.arpa / ip6.arpa names matched as addresses.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - tag: private
    type: ip_set
    args: { ips: ["10.0.0.0/8"] }
  - tag: main
    type: sequence
    args:
      - { matches: "ptr_ip 192.0.2.0/24 2001:db8::/32", exec: reject 3 }
      - { matches: "ptr_ip $private", exec: reject 4 }
      - exec: reject 5
${serversYaml()}
`);
});
afterAll(() => s.stop());

const rcode = async (name: string, type = "PTR"): Promise<number> => rcodeOf(await query(s.udpPort, name, type));
const v6Reverse = (hex32: string): string => `${[...hex32].reverse().join(".")}.ip6.arpa`;

test("IPv4 and IPv6 reverse names decode to addresses that match", async () => {
  expect(await rcode("5.2.0.192.in-addr.arpa")).toBe(3);
  expect(await rcode("5.2.0.192.IN-ADDR.ARPA.")).toBe(3);
  expect(await rcode(v6Reverse("20010db8000000000000000000000001"))).toBe(3);
  expect(await rcode("1.0.0.10.in-addr.arpa")).toBe(4);
});

test("an IPv4-mapped ip6.arpa name matches IPv4 rules", async () => {
  expect(await rcode(v6Reverse("00000000000000000000ffffc0000209"))).toBe(3);
});

test("other addresses, partial names and non-PTR questions do not match", async () => {
  expect(await rcode("1.1.168.192.in-addr.arpa")).toBe(5);
  expect(await rcode("2.0.192.in-addr.arpa")).toBe(5);
  expect(await rcode("5.2.0.192.in-addr.arpa", "A")).toBe(5);
  expect(await rcode("example.test")).toBe(5);
});
