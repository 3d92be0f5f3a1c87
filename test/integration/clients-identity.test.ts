// Who asked, over real UDP sockets from different loopback addresses (127.0.0.0/8 is all local on
// Linux), with dig: an address, the longest of two CIDRs, a group by address, a group by membership,
// the MAC in EDNS option 65001 and an ECS address, each believed from a trusted forwarder only. The
// sequence answers a different rcode for each client, so the status says who was identified.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { metricValue } from "../helpers/proc.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

const run = promisify(execFile);

const yaml = `
api: { http: "127.0.0.1:0" }
plugins:
  - tag: clients
    type: clients
    args:
      clients:
        - { name: desk, addresses: [127.0.1.0/24] }
        - { name: anna, addresses: [127.0.1.2], groups: [kids] }
        - { name: bench, addresses: [127.0.1.16/28] }
        - { name: ben, addresses: [127.0.1.3], groups: [kids] }
        - { name: tv, macs: ["aa:bb:cc:dd:ee:01"] }
        - { name: phone, addresses: [192.168.1.37] }
      groups:
        - { name: kids }
        - { name: guests, addresses: [127.0.2.0/24] }
      trusted_forwarders: [127.0.0.1, 127.0.1.40]
  - tag: main
    type: sequence
    args:
      - { matches: "client anna", exec: reject 2 }
      - { matches: "client desk", exec: reject 3 }
      - { matches: "client bench", exec: reject 4 }
      - { matches: "client tv", exec: reject 5 }
      - { matches: "client phone", exec: reject 6 }
      - { matches: "client guests", exec: reject 7 }
      - { matches: "client kids", exec: reject 8 }
      - exec: reject 9
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

// What the sequence above answers for each client.
const WHO: Record<string, string> = {
  SERVFAIL: "anna",
  NXDOMAIN: "desk",
  NOTIMP: "bench",
  REFUSED: "tv",
  YXDOMAIN: "phone",
  YXRRSET: "guests",
  NXRRSET: "kids",
  NOTAUTH: "nobody",
};

let s: RunningSluice;
beforeAll(async () => {
  requireTool("dig");
  s = await startSluice(yaml);
});
afterAll(() => s.stop());

/** Who the sequence took the client of a dig query from `source` (with `options`) for. */
async function who(source: string, ...options: string[]): Promise<string> {
  const { stdout } = await run("dig", ["@127.0.0.1", "-p", String(s.udpPort), "-b", source, "+time=2", "+tries=1", ...options, "who.test", "A"], { timeout: 5000 });
  const status = /status: ([A-Z]+)/.exec(stdout)?.[1] ?? `no status in ${stdout}`;
  return WHO[status] ?? status;
}

describe("addresses", () => {
  test("an address names its client; of two CIDRs holding an address, the longer wins", async () => {
    expect(await who("127.0.1.2")).toBe("anna");
    expect(await who("127.0.1.17")).toBe("bench");
    expect(await who("127.0.1.31")).toBe("bench");
    expect(await who("127.0.1.32")).toBe("desk");
    expect(await who("127.0.1.200")).toBe("desk");
    expect(await who("127.0.3.1")).toBe("nobody");
  });

  test("a group by address holds clients no one named; a group by membership holds its clients", async () => {
    expect(await who("127.0.2.5")).toBe("guests");
    expect(await who("127.0.2.250")).toBe("guests");
    expect(await who("127.0.1.3")).toBe("kids");
  });
});

describe("from a forwarder", () => {
  test("the MAC in EDNS option 65001 names its client from a trusted forwarder, and is ignored from any other source", async () => {
    expect(await who("127.0.0.1", "+ednsopt=65001:aabbccddee01")).toBe("tv");
    expect(await who("127.0.3.1", "+ednsopt=65001:aabbccddee01")).toBe("nobody");
    // From a named address: the address decides.
    expect(await who("127.0.1.2", "+ednsopt=65001:aabbccddee01")).toBe("anna");
    // Another MAC: no one.
    expect(await who("127.0.0.1", "+ednsopt=65001:aabbccddee02")).toBe("nobody");
  });

  test("the ECS address names its client from a trusted forwarder, and is ignored from any other source", async () => {
    expect(await who("127.0.0.1", "+subnet=192.168.1.37/32")).toBe("phone");
    expect(await who("127.0.0.1", "+subnet=127.0.1.2/32")).toBe("anna");
    expect(await who("127.0.0.1", "+subnet=127.0.2.0/24")).toBe("guests");
    expect(await who("127.0.3.1", "+subnet=192.168.1.37/32")).toBe("nobody");
    expect(await who("127.0.1.17", "+subnet=192.168.1.37/32")).toBe("bench");
    // A source prefix of 0 passes no address on: the forwarder is the client.
    expect(await who("127.0.1.40", "+subnet=0.0.0.0/0")).toBe("desk");
    expect(await who("127.0.1.40", "+subnet=127.0.1.2/32")).toBe("anna");
    // The MAC comes before the address.
    expect(await who("127.0.0.1", "+subnet=192.168.1.37/32", "+ednsopt=65001:aabbccddee01")).toBe("tv");
  });

  test("queries are counted by group, never by client", async () => {
    const metrics = async (): Promise<string> => (await s.api("/api/metrics")).text();
    const count = (text: string, group: string): number => metricValue(text, "client_group_queries_total", `plugin_tag="clients",group="${group}"`) || 0;
    const before = await metrics();
    await who("127.0.1.2");
    await who("127.0.1.3");
    await who("127.0.2.9");
    const text = await metrics();
    expect(count(text, "kids") - count(before, "kids")).toBe(2);
    expect(count(text, "guests") - count(before, "guests")).toBe(1);
    expect(text).not.toMatch(/client_group_queries_total\{[^}]*anna/);
  });
});
