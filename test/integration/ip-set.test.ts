// `ip_set` seen from a client through `resp_ip $set` and `client_ip $set`: inline, file and
// nested sets, reload, failed reloads that keep the old addresses, and a refused second reload.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { ask as askActor } from "../../actors/ask.js";
import { concernActor } from "../../actors/app.actor.js";
import type { ProviderPlugin } from "../../src/registry/types.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

/** A reload as the API and reload_provider ask for it: through the provider's actor (one at a time). */
function reloadThroughActor(tag: string): Promise<unknown> {
  const actor = concernActor(s.app.actor.system, s.app.generation, tag);
  if (!actor) throw new Error(`${tag} has no provider actor`);
  return askActor(actor, { type: "PROVIDER.RELOAD" });
}

let s: RunningSluice;
const lan = (): ProviderPlugin => s.app.runtime.live("lan")?.instance as ProviderPlugin;
const rcode = async (name: string, type = "A"): Promise<number> => rcodeOf(await query(s.udpPort, name, type));

beforeAll(async () => {
  s = await startSluice(
    `
plugins:
  - tag: inner
    type: ip_set
    args: { ips: ["198.51.100.0/24"] }
  - tag: lan
    type: ip_set
    args: { ips: ["192.0.2.200"], files: [lan.txt], sets: [inner] }
  - tag: answers
    type: hosts
    args:
      entries:
        - "inner.test 198.51.100.7"
        - "inline.test 192.0.2.200"
        - "out.test 203.0.113.7"
        - "v6.test 2001:db8::7"
  - tag: main
    type: sequence
    args:
      - exec: $answers
      - { matches: "resp_ip $lan", exec: reject 3 }
      - { matches: "client_ip $lan", exec: reject 4 }
      - { matches: has_resp, exec: accept }
      - exec: reject 5
${serversYaml()}
`,
    { "lan.txt": "# loopback and a v6 lab net\n127.0.0.1\n2001:db8::/64\n" },
  );
});
afterAll(() => s.stop());

test("inline addresses, file rules and nested sets all match", async () => {
  expect(await rcode("inline.test")).toBe(3);
  expect(await rcode("inner.test")).toBe(3);
  expect(await rcode("v6.test", "AAAA")).toBe(3);
  // out.test's address is not in the set, but the client (127.0.0.1) is.
  expect(await rcode("out.test")).toBe(4);
});

test("reload picks up the edited file", async () => {
  writeFileSync(join(s.dir, "lan.txt"), "10.0.0.0/8\n");
  await lan().reload?.();
  const out = await query(s.udpPort, "out.test", "A");
  expect(rcodeOf(out)).toBe(0);
  expect(answerIps(out)).toEqual(["203.0.113.7"]);
  expect(await rcode("v6.test", "AAAA")).toBe(0);
  // Inline and nested rules come back with the rebuild.
  expect(await rcode("inline.test")).toBe(3);
  expect(await rcode("inner.test")).toBe(3);
});

test("a failed reload keeps the previous addresses", async () => {
  writeFileSync(join(s.dir, "lan.txt"), "127.0.0.1\n10.0.0.0/33\n");
  await expect(lan().reload?.()).rejects.toThrow(/lan\.txt:2: '10\.0\.0\.0\/33' has a bad prefix length/);
  expect(await rcode("out.test")).toBe(0); // 127.0.0.1 did not come back
  rmSync(join(s.dir, "lan.txt"));
  await expect(lan().reload?.()).rejects.toThrow(/cannot read rule file 'lan\.txt'/);
  expect(await rcode("inner.test")).toBe(3);
});

test("a second reload while one runs is refused", async () => {
  writeFileSync(join(s.dir, "lan.txt"), "127.0.0.1\n");
  const first = reloadThroughActor("lan");
  await expect(reloadThroughActor("lan")).rejects.toMatchObject({ guard: "providerIdle" });
  await first;
  expect(await rcode("out.test")).toBe(4);
});

test("a set that references a non-IP provider does not start", async () => {
  const bad = startSluice(
    `
plugins:
  - tag: names
    type: domain_set
    args: { exps: [example.com] }
  - tag: ips
    type: ip_set
    args: { sets: [names] }
  - tag: main
    type: sequence
    args: [{ matches: "client_ip $ips", exec: reject 3 }]
${serversYaml()}
`,
  );
  await expect(bad).rejects.toThrow(/provider 'names' cannot match IP addresses/);
});
