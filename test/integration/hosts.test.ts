// `hosts` seen from a client: answers with TTL 10, NODATA with a SOA, pass-through, last
// definition wins, Next vs short_circuit, and its hit/miss counters.
import { afterAll, beforeAll, expect, test } from "vitest";
import { QTYPE } from "../../src/dns/constants.js";
import { readSoa } from "../../src/dns/rdata.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const hostsFile = `# hosts file
dup.test 192.0.2.11
file.test 192.0.2.20   # trailing comment

domain:files.test 192.0.2.21 2001:db8::21
file.test 192.0.2.22
`;

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(
    `
plugins:
  - tag: hosts_stop
    type: hosts
    args: { entries: ["stop.test 192.0.2.77"], short_circuit: true }
  - tag: hosts_next
    type: hosts
    args:
      entries:
        - "example.test 192.0.2.1 192.0.2.2 2001:db8::1"
        - "domain:corp.test 10.0.0.1"
        - "v6only.test 2001:db8::6"
        - "keyword:tracker 0.0.0.0"
        - "regexp:^cdn[0-9]+\\\\.example\\\\.net$ 198.51.100.9"
        - "dup.test 192.0.2.10"
        - "stop.test 192.0.2.78"
        - "after.test 192.0.2.50"
      files: [hosts.txt]
  - tag: main
    type: sequence
    args:
      - exec: $hosts_stop
      - exec: $hosts_next
      - { matches: "qname full:after.test", exec: reject 3 }
      - { matches: has_resp, exec: accept }
      - exec: reject 5
${serversYaml()}
`,
    { "hosts.txt": hostsFile },
  );
});
afterAll(() => s.stop());

test("A and AAAA are answered from the entry with TTL 10", async () => {
  const a = await query(s.udpPort, "example.test", "A");
  expect(rcodeOf(a)).toBe(0);
  expect(answerIps(a)).toEqual(["192.0.2.1", "192.0.2.2"]);
  expect(a.answers.every((r) => r.ttl === 10 && r.type === QTYPE.A)).toBe(true);
  const aaaa = await query(s.tcpPort, "example.test", "AAAA", { tcp: true });
  expect(answerIps(aaaa)).toEqual(["2001:db8::1"]);
  expect(aaaa.answers[0].ttl).toBe(10);
});

test("the name is matched case-insensitively and without the trailing dot", async () => {
  expect(answerIps(await query(s.udpPort, "EXAMPLE.Test.", "A"))).toEqual(["192.0.2.1", "192.0.2.2"]);
});

test("an entry without the requested family answers NODATA with a SOA (TTL 300)", async () => {
  for (const [name, type] of [["v6only.test", "A"], ["corp.test", "AAAA"]] as const) {
    const m = await query(s.udpPort, name, type);
    expect(rcodeOf(m)).toBe(0);
    expect(m.answers).toEqual([]);
    expect(m.authorities).toHaveLength(1);
    expect(m.authorities[0].type).toBe(QTYPE.SOA);
    expect(m.authorities[0].ttl).toBe(300);
    expect(readSoa(m.authorities[0].data).minimum).toBe(300);
  }
});

test("domain:, keyword: and regexp: rules answer too; unprefixed rules are full:", async () => {
  expect(answerIps(await query(s.udpPort, "a.b.corp.test", "A"))).toEqual(["10.0.0.1"]);
  expect(answerIps(await query(s.udpPort, "ads.tracker.example", "A"))).toEqual(["0.0.0.0"]);
  expect(answerIps(await query(s.udpPort, "cdn42.example.net", "A"))).toEqual(["198.51.100.9"]);
  // example.test is `full:`: a subdomain passes through to the final REFUSED.
  expect(rcodeOf(await query(s.udpPort, "www.example.test", "A"))).toBe(5);
});

test("rules from files are used, and the last definition of a pattern wins", async () => {
  expect(answerIps(await query(s.udpPort, "dup.test", "A"))).toEqual(["192.0.2.11"]);
  expect(answerIps(await query(s.udpPort, "file.test", "A"))).toEqual(["192.0.2.22"]);
  expect(answerIps(await query(s.udpPort, "x.files.test", "AAAA"))).toEqual(["2001:db8::21"]);
});

test("unmatched names, other types and other classes pass through untouched", async () => {
  expect(rcodeOf(await query(s.udpPort, "nothing.test", "A"))).toBe(5);
  expect(rcodeOf(await query(s.udpPort, "example.test", "MX"))).toBe(5);
  expect(rcodeOf(await query(s.udpPort, "example.test", "A", { qclass: 3 }))).toBe(5);
});

test("without short_circuit the sequence goes on; with it the sequence stops", async () => {
  // hosts_next answered after.test, then the next rule replaced the answer.
  expect(rcodeOf(await query(s.udpPort, "after.test", "A"))).toBe(3);
  // hosts_stop stopped the sequence: hosts_next (192.0.2.78) never ran.
  expect(answerIps(await query(s.udpPort, "stop.test", "A"))).toEqual(["192.0.2.77"]);
});

test("hits and misses are counted per plugin; other query types are not counted", async () => {
  const read = async (): Promise<(name: string, tag: string) => number> => {
    const text = await s.app.services.metrics.registry.metrics();
    return (name, tag) => {
      const m = new RegExp(`^${name}\\{plugin_tag="${tag}"\\} (\\d+)$`, "m").exec(text);
      return m ? Number(m[1]) : 0;
    };
  };
  const before = await read();
  await query(s.udpPort, "stop.test", "A");
  await query(s.udpPort, "stop.test", "AAAA");
  await query(s.udpPort, "nothing.test", "A");
  await query(s.udpPort, "example.test", "MX");
  const after = await read();
  const delta = (name: string, tag: string): number => after(name, tag) - before(name, tag);
  expect(delta("hosts_hit_total", "hosts_stop")).toBe(2);
  expect(delta("hosts_miss_total", "hosts_stop")).toBe(1);
  expect(delta("hosts_hit_total", "hosts_next")).toBe(0);
  expect(delta("hosts_miss_total", "hosts_next")).toBe(1);
});

test("a bad line in a hosts file stops startup with the file and line", async () => {
  const bad = startSluice(
    `
plugins:
  - tag: h
    type: hosts
    args: { files: [bad.txt] }
  - tag: main
    type: sequence
    args: [{ exec: $h }]
${serversYaml()}
`,
    { "bad.txt": "ok.test 192.0.2.1\n\nnope.test 192.0.2.300\n" },
  );
  await expect(bad).rejects.toThrow(/bad\.txt:3: '192\.0\.2\.300' is not an IP address/);
});
