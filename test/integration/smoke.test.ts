import { afterAll, beforeAll, expect, test } from "vitest";
import { ask, rcodeOf } from "../helpers/dns.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - tag: main
    type: sequence
    args:
      - exec: mark 1
      - exec: reject 3
${serversYaml()}
`);
});
afterAll(() => s.stop());

test("udp and tcp answer", async () => {
  const u = await ask(s.udpPort, "example.com", "A");
  expect(rcodeOf(u)).toBe(3);
  const t = await ask(s.tcpPort, "example.com", "A", { tcp: true });
  expect(rcodeOf(t)).toBe(3);
});
