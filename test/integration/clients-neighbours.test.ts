// MAC addresses from the kernel's neighbour table (`ip -j neigh show`): the real program runs in a network
// namespace of the test's own (test/helpers/netns.ts) with a dummy (or veth) link and permanent neighbour entries; a
// query sent from a neighbour's address (also put on `lo`, so that dig can send from it) is identified by
// the MAC the table gives that address. Without an `ip` tool the table is off, said once at info.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { CLI, startCli, type RunningCli } from "../helpers/cli.js";
import { makeNetns, type Netns } from "../helpers/netns.js";
import { tempDir } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

const CONFIG = `api:
  http: 127.0.0.1:0
plugins:
  - tag: clients
    type: clients
    args:
      clients:
        - { name: printer, macs: ["02:00:00:00:00:07"], groups: [office] }
      groups: [{ name: office }]
      neighbour_refresh: 100ms
  - tag: main
    type: sequence
    args:
      - { matches: "client printer", exec: reject 4 }
      - { matches: "client office", exec: reject 5 }
      - exec: reject 2
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

const dir = tempDir();
const runs: RunningCli[] = [];
let ns: Netns;
let dig = "";
let curl = "";
beforeAll(async () => {
  dig = requireTool("dig");
  curl = requireTool("curl");
  const ip = requireTool("ip");
  ns = await makeNetns();
  // A dummy link, or where the kernel has no dummy module (some containers) one end of a veth pair.
  await ns.exec([ip, "link", "add", "d0", "type", "dummy"]).catch(async () => {
    await ns.exec([ip, "link", "add", "d0", "type", "veth", "peer", "name", "d1"]);
    await ns.exec([ip, "link", "set", "d1", "up"]);
  });
  for (const argv of [
    ["link", "set", "d0", "up"],
    ["addr", "add", "10.9.0.1/24", "dev", "d0"],
    ["neigh", "add", "10.9.0.7", "lladdr", "02:00:00:00:00:07", "dev", "d0", "nud", "permanent"],
    ["addr", "add", "10.9.0.7/32", "dev", "lo"],
    ["addr", "add", "10.9.0.8/32", "dev", "lo"],
  ]) {
    await ns.exec([ip, ...argv]);
  }
  writeFileSync(join(dir, "sluice.yaml"), CONFIG);
});
afterAll(async () => {
  for (const run of runs) {
    run.child.kill("SIGKILL");
    await run.exited;
  }
  await ns.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** The program in the namespace (`env` replaces its environment's PATH when given). */
async function startInNetns(path?: string): Promise<{ run: RunningCli; api: string; port: number }> {
  const launcher = join(dir, "sluice-in-netns");
  const env = path === undefined ? "" : `env PATH=${path} `;
  writeFileSync(launcher, `#!/bin/sh\nexec ${ns.prefix.join(" ")} ${env}${process.execPath} ${CLI} "$@"\n`, { mode: 0o755 });
  const run = startCli(["-c", "sluice.yaml", "-d", dir, "-l", "debug"], { launcher });
  runs.push(run);
  const api = `http://127.0.0.1:${String((await run.waitForLog((l) => l.msg === "management API listening")).port)}`;
  const port = Number((await run.waitForLog((l) => l.msg === "udp server listening")).port);
  await run.waitForLog((l) => l.msg === "sluice started");
  return { run, api, port };
}

async function stop(run: RunningCli): Promise<void> {
  run.child.kill("SIGTERM");
  await run.exited;
  runs.splice(runs.indexOf(run), 1);
}

/** The rcode name of a query sent from `source`, inside the namespace. */
async function statusFrom(source: string, port: number): Promise<string> {
  const out = await ns.exec([dig, "-b", source, "-p", String(port), "@127.0.0.1", "+tries=1", "+time=2", "who.test", "A"]);
  return /status: ([A-Z]+)/.exec(out)?.[1] ?? out;
}

async function api(base: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const args = ["-s", "-X", method, `${base}/api/${path}`];
  if (body !== undefined) args.push("-H", "content-type: application/json", "-d", JSON.stringify(body));
  return JSON.parse(await ns.exec([curl, ...args])) as Record<string, unknown>;
}

async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("a client declared by its MAC is identified through the neighbour table; the table is read again every neighbour_refresh", async () => {
  const { run, api: base, port } = await startInNetns();
  try {
    expect(await statusFrom("10.9.0.7", port)).toBe("NOTIMP");
    expect(await statusFrom("127.0.0.1", port)).toBe("SERVFAIL");
    const list = (await api(base, "GET", "plugins/clients/clients")) as { clients: { name: string; seen: Record<string, unknown> | null }[] };
    expect(list.clients[0]).toMatchObject({ name: "printer", seen: { address: "10.9.0.7", mac: "02:00:00:00:00:07", queries: 1 } });

    // A client named by a MAC the table does not hold yet: identified once the kernel has the entry and a refresh read it.
    expect(await api(base, "POST", "plugins/clients/clients", { name: "tablet", macs: ["02:00:00:00:00:08"], groups: ["office"] })).toMatchObject({ ok: true });
    expect(await statusFrom("10.9.0.8", port)).toBe("SERVFAIL");
    await ns.exec([requireTool("ip"), "neigh", "add", "10.9.0.8", "lladdr", "02:00:00:00:00:08", "dev", "d0", "nud", "permanent"]);
    await eventually("the refreshed table", async () => ((await statusFrom("10.9.0.8", port)) === "REFUSED" ? true : undefined));
    const actors = (await api(base, "GET", "actors")) as { actors: { id: string; state: unknown; context: Record<string, unknown> }[] };
    const actor = actors.actors.find((a) => a.id.endsWith("/clients:clients"));
    expect(actor?.context.neighbours).toBeGreaterThanOrEqual(2);
  } finally {
    await stop(run);
  }
});

test("without the `ip` tool the neighbour table is off, said once at info", async () => {
  const { run, api: base, port } = await startInNetns("/nonexistent");
  try {
    expect(await statusFrom("10.9.0.7", port)).toBe("SERVFAIL");
    const actors = (await api(base, "GET", "actors")) as { actors: { id: string; state: unknown }[] };
    expect(actors.actors.find((a) => a.id.endsWith("/clients:clients"))?.state).toMatchObject({ running: { neighbours: "off" } });
    const said = run.logs.filter((l) => typeof l.msg === "string" && l.msg.startsWith("the neighbour table is not read"));
    expect(said).toHaveLength(1);
    expect(said[0].level).toBe(30);
  } finally {
    await stop(run);
  }
});
