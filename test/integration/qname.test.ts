// `qname` seen from a client: every rule kind inline, rules from a file, domain_set providers,
// regexps containing commas and spaces, declared matchers, and errors reported at startup.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(
    `
plugins:
  - tag: provided
    type: domain_set
    args: { exps: ["domain:provided.test"] }
  - tag: listed
    type: qname
    args: ["keyword:listed", "$provided"]
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:exact.test, domain:zone.test", exec: reject 3 }
      - { matches: "qname regexp:^(ads|trk)[0-9]{1,3}\\\\.test$", exec: reject 4 }
      - { matches: "qname regexp:^[ ]?cdn[0-9]+\\\\.test$", exec: reject 6 }
      - { matches: "qname &names.txt", exec: reject 9 }
      - { matches: $listed, exec: reject 10 }
      - exec: reject 5
${serversYaml()}
`,
    { "names.txt": "# from a file\nfull:file-a.test file-b.test\n\nkeyword:infile\n" },
  );
});
afterAll(() => s.stop());

const rcode = async (name: string): Promise<number> => rcodeOf(await query(s.udpPort, name, "A"));

test("full: and domain: rules in one quick setup, split on the comma", async () => {
  expect(await rcode("exact.test")).toBe(3);
  expect(await rcode("www.exact.test")).toBe(5);
  expect(await rcode("zone.test")).toBe(3);
  expect(await rcode("a.b.ZONE.test.")).toBe(3);
});

test("a regexp keeps its commas and spaces", async () => {
  expect(await rcode("ads12.test")).toBe(4);
  expect(await rcode("trk1.test")).toBe(4);
  expect(await rcode("ads1234.test")).toBe(5);
  expect(await rcode("cdn7.test")).toBe(6);
});

test("rules from a file (several per line) and providers match", async () => {
  expect(await rcode("file-a.test")).toBe(9);
  expect(await rcode("sub.file-b.test")).toBe(9);
  expect(await rcode("x.infile.y")).toBe(9);
  expect(await rcode("sub.file-a.test")).toBe(5);
  expect(await rcode("www.provided.test")).toBe(10);
  expect(await rcode("the-listed-name.org")).toBe(10);
  expect(await rcode("unrelated.org")).toBe(5);
});

const failingConfig = (matcher: string, extra = ""): string => `
plugins:${extra}
  - tag: main
    type: sequence
    args: [{ matches: "${matcher}", exec: reject 3 }]
${serversYaml()}
`;

test("bad rules, empty lists and non-domain providers are reported", async () => {
  await expect(startSluice(failingConfig("qname domain:a.com domian:b.com"))).rejects.toThrow(/rule 'domian:b\.com' has an unknown kind 'domian:'/);
  await expect(startSluice(failingConfig("qname regexp:(x"))).rejects.toThrow(/'regexp:\(x' is not a valid regular expression/);
  await expect(startSluice(failingConfig("qname"))).rejects.toThrow(/needs at least one domain rule/);
  await expect(startSluice(failingConfig("qname $missing"))).rejects.toThrow(/missing plugin 'missing'/);
  const ipSet = `
  - tag: nets
    type: ip_set
    args: { ips: [10.0.0.0/8] }`;
  await expect(startSluice(failingConfig("qname $nets", ipSet))).rejects.toThrow(/provider 'nets' cannot match domain names/);
  await expect(startSluice(failingConfig("qname &nope.txt"))).rejects.toThrow(/cannot read rule file 'nope\.txt'/);
});
