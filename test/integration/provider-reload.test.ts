// Provider reload in place: the file behind a domain_set changes, the provider alone reloads, and
// every one of 1 000 queries sent while it rebuilds gets an answer.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { decodeMessage } from "../../src/dns/message.js";
import type { ProviderPlugin } from "../../src/registry/types.js";
import { query, buildQuery, rcodeOf, udpBurst } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const list = (names: string[]): string => Array.from({ length: 150_000 }, (_, i) => `full:filler${i}.test`).concat(names).join("\n") + "\n";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(
    `
plugins:
  - { tag: blocklist, type: domain_set, args: { files: [block.txt] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $blocklist", exec: reject NXDOMAIN }
      - exec: black_hole 192.0.2.1
${serversYaml()}
`,
    { "block.txt": list(["old.test"]) },
  );
});
afterAll(() => s.stop());

test("editing the file and reloading the provider changes answers; 1 000 queries during the reload are all answered", async () => {
  expect(rcodeOf(await query(s.udpPort, "old.test"))).toBe(3);
  expect(rcodeOf(await query(s.udpPort, "new.test"))).toBe(0);
  const runtimeBefore = s.app.runtime;

  writeFileSync(join(s.dir, "block.txt"), list(["new.test"]));
  const provider = s.app.runtime.live("blocklist")?.instance as ProviderPlugin;
  const packets = Array.from({ length: 1000 }, (_, i) => buildQuery(i % 2 === 0 ? "stable.test" : `filler${i}.test`, "A", { id: i + 1 }));
  const answers = new Map<number, Buffer>();
  let answeredDuringReload = 0;
  await Promise.all([
    udpBurst(s.udpPort, packets, { perTick: 5, timeoutMs: 10_000, sink: answers }),
    provider.reload?.().then(() => (answeredDuringReload = answers.size)),
  ]);
  // The rebuild yields to the event loop: queries were answered while it ran.
  expect(answeredDuringReload).toBeGreaterThan(0);

  expect(answers.size).toBe(1000);
  for (const [id, raw] of answers) {
    const m = decodeMessage(raw);
    // filler names are blocked in both the old and the new list; stable.test in neither
    expect(rcodeOf(m)).toBe(id % 2 === 1 ? 0 : 3);
  }
  expect(rcodeOf(await query(s.udpPort, "new.test"))).toBe(3);
  expect(rcodeOf(await query(s.udpPort, "old.test"))).toBe(0);
  expect(s.app.runtime).toBe(runtimeBefore); // no full reload happened
});
