// A real resolver client (dig, from BIND) against our UDP and TCP servers: what an operator types.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

requireTool("dig");
const execFileAsync = promisify(execFile);

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(`
plugins:
  - { tag: local, type: hosts, args: { entries: ["domain:localhost 127.0.0.1 ::1"], short_circuit: true } }
  - tag: main
    type: sequence
    args:
      - exec: $local
      - exec: reject NXDOMAIN
${serversYaml()}
`);
});
afterAll(() => s.stop());

// Asynchronous: the servers under test run in this same process and must keep answering.
const run = async (...args: string[]): Promise<string> => (await execFileAsync("dig", ["@127.0.0.1", "+time=2", "+tries=1", ...args], { timeout: 5000 })).stdout;

test("dig gets answers over UDP and TCP, with and without EDNS", async () => {
  expect((await run("-p", String(s.udpPort), "localhost", "+short")).trim()).toBe("127.0.0.1");
  expect((await run("-p", String(s.udpPort), "foo.localhost", "AAAA", "+short")).trim()).toBe("::1");
  expect((await run("-p", String(s.tcpPort), "+tcp", "localhost", "+short")).trim()).toBe("127.0.0.1");
  expect((await run("-p", String(s.udpPort), "+noedns", "localhost", "+short")).trim()).toBe("127.0.0.1");
  const full = await run("-p", String(s.udpPort), "example.invalid");
  expect(full).toMatch(/status: NXDOMAIN/);
  expect(full).toMatch(/EDNS: version: 0/);
});
