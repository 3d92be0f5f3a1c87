// `client_ip` seen from clients on different loopback addresses (127.0.0.0/8 is all local on Linux):
// single addresses, CIDRs from a file, IPv4-mapped rules, $ip_set providers and declared matchers.
import { afterAll, beforeAll, expect, test } from "vitest";
import { rcodeFrom } from "../helpers/client-source.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";


let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(
    `
plugins:
  - tag: office
    type: ip_set
    args: { ips: ["127.0.0.3"] }
  - tag: lab
    type: client_ip
    args: ["127.0.0.16/28", "$office"]
  - tag: main
    type: sequence
    args:
      - { matches: "client_ip 127.0.0.2", exec: reject 2 }
      - { matches: "client_ip &clients.txt", exec: reject 3 }
      - { matches: "client_ip $office", exec: reject 4 }
      - { matches: "client_ip ::ffff:127.0.0.8/125", exec: reject 9 }
      - { matches: $lab, exec: reject 10 }
      - exec: reject 5
${serversYaml()}
`,
    { "clients.txt": "# a /30\n127.0.0.4/30\n" },
  );
});
afterAll(() => s.stop());

test("each rule form decides for its clients", async () => {
  const port = s.udpPort;
  expect(await rcodeFrom("127.0.0.1", port)).toBe(5);
  expect(await rcodeFrom("127.0.0.2", port)).toBe(2);
  expect(await rcodeFrom("127.0.0.4", port)).toBe(3);
  expect(await rcodeFrom("127.0.0.7", port)).toBe(3);
  expect(await rcodeFrom("127.0.0.3", port)).toBe(4);
  expect(await rcodeFrom("127.0.0.8", port)).toBe(9);
  expect(await rcodeFrom("127.0.0.15", port)).toBe(9);
  expect(await rcodeFrom("127.0.0.16", port)).toBe(10);
  expect(await rcodeFrom("127.0.0.31", port)).toBe(10);
  expect(await rcodeFrom("127.0.0.32", port)).toBe(5);
});

test("a provider without IP matching is reported at startup", async () => {
  const bad = startSluice(
    `
plugins:
  - tag: names
    type: domain_set
    args: { exps: [example.com] }
  - tag: main
    type: sequence
    args: [{ matches: "client_ip $names", exec: reject 3 }]
${serversYaml()}
`,
  );
  await expect(bad).rejects.toThrow(/provider 'names' cannot match IP addresses/);
});

test("bad rules and empty lists are rejected before anything starts", async () => {
  await expect(
    startSluice(`
plugins:
  - tag: main
    type: sequence
    args: [{ matches: "client_ip 10.0.0.0/8 300.1.1.1", exec: reject 3 }]
${serversYaml()}
`),
  ).rejects.toThrow(/'300\.1\.1\.1' is not an IP address or CIDR/);
  await expect(
    startSluice(`
plugins:
  - tag: m
    type: client_ip
  - tag: main
    type: sequence
    args: [{ matches: $m, exec: reject 3 }]
${serversYaml()}
`),
  ).rejects.toThrow(/needs at least one IP rule, &file or \$provider/);
});
