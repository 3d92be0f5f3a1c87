// `ipset` against the kernel: Sluice runs here (its sockets on 127.0.0.1), the tool runs inside a
// network namespace of the test's own (`command: [ip, netns, exec, <ns>, ipset]`), and the test lists
// the sets there. Masked prefixes of both families with their timeouts, answer TTLs clamped, batches
// (many prefixes → few runs of the tool), the memory of what was written, a full queue, a failing
// write, the flush at shutdown, and a program that is not there.
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, expect, test, vi } from "vitest";
import { query } from "../helpers/dns.js";
import { ipsetEntries, makeNetns, withToolOnPath, type Netns } from "../helpers/netns.js";
import { requireTool } from "../helpers/tools.js";
import { counters, distinct24s, writeNow, startSets, startZone, type Zone } from "./sets-helpers.js";

let ns: Netns;
let zone: Zone;
let command = "";

beforeAll(async () => {
  ns = await makeNetns();
  zone = await startZone();
  command = JSON.stringify([...ns.prefix, ns.ipset]);
  for (const set of ["a4", "b4", "c4", "d4", "e4", "f4", "g4"]) await ns.exec([ns.ipset, "create", set, "hash:net", "family", "inet", "timeout", "0"]);
  await ns.exec([ns.ipset, "create", "a6", "hash:net", "family", "inet6", "timeout", "0"]);
});
afterAll(async () => {
  await zone?.responder.close();
  await ns?.remove();
});

const plugin = (args: string): string => `  - tag: sets
    type: ipset
    args: { command: ${command}, ${args} }`;

test("A and AAAA answers land in their sets masked to mask4/mask6, with the fixed timeout; POST write answers once they are written", async () => {
  zone.names.set("both.test", { ips: ["192.0.2.10", "192.0.2.200", "198.51.100.1", "2001:db8:aaaa:1::1", "2001:db8:bbbb::1"], ttl: 300 });
  const s = await startSets(zone, plugin("set_name4: a4, set_name6: a6, mask6: 48, timeout: 1h, batch_interval: 1h"));
  try {
    await query(s.udpPort, "both.test", "A");
    await query(s.udpPort, "both.test", "AAAA");
    // Two A records share a /24: three prefixes of four addresses.
    expect(await counters(s, "ipset")).toEqual({ entries: 4, dropped: 0, writes: 0, errors: 0 });
    expect(await writeNow(s)).toEqual({ status: 200, body: { ok: true, written: 4, failed: 0, error: null } });
    const v4 = await ipsetEntries(ns, "a4");
    expect([...v4.keys()].sort()).toEqual(["192.0.2.0/24", "198.51.100.0/24"]);
    const v6 = await ipsetEntries(ns, "a6");
    expect([...v6.keys()].sort()).toEqual(["2001:db8:aaaa::/48", "2001:db8:bbbb::/48"]);
    for (const left of [...v4.values(), ...v6.values()]) expect(left).toBeGreaterThan(3590);
    expect((await counters(s, "ipset")).writes).toBe(1);
    // Nothing queued: answered at once, nothing run.
    expect(await writeNow(s)).toEqual({ status: 200, body: { ok: true, written: 0, failed: 0, error: null } });
    expect((await counters(s, "ipset")).writes).toBe(1);
  } finally {
    await s.stop();
  }
});

test("timeout: ttl takes each record's TTL, clamped to min_timeout..max_timeout; an entry already there takes the new timeout", async () => {
  zone.names.set("short.test", { ips: ["203.0.113.5"], ttl: 5 });
  zone.names.set("long.test", { ips: ["203.0.114.5"], ttl: 86400 });
  zone.names.set("mid.test", { ips: ["203.0.115.5"], ttl: 900 });
  await ns.exec([ns.ipset, "add", "b4", "203.0.115.0/24", "timeout", "50"]);
  const s = await startSets(zone, plugin("set_name4: b4, timeout: ttl, min_timeout: 2m, max_timeout: 30m, batch_interval: 1h"));
  try {
    for (const name of ["short.test", "long.test", "mid.test"]) await query(s.udpPort, name, "A");
    expect((await writeNow(s)).body).toMatchObject({ ok: true, written: 3 });
    const left = await ipsetEntries(ns, "b4");
    const near = (v: number | null | undefined, want: number): boolean => v !== null && v !== undefined && v <= want && v >= want - 10;
    expect(near(left.get("203.0.113.0/24"), 120), `min: ${String(left.get("203.0.113.0/24"))}`).toBe(true);
    expect(near(left.get("203.0.114.0/24"), 1800), `max: ${String(left.get("203.0.114.0/24"))}`).toBe(true);
    expect(near(left.get("203.0.115.0/24"), 900), `ttl over an entry of 50 s: ${String(left.get("203.0.115.0/24"))}`).toBe(true);
  } finally {
    await s.stop();
  }
});

test("batches: 40 new prefixes are 4 runs of the tool with batch_size 10; answers seen again queue nothing until half their timeout has passed", async () => {
  const clockShift = { ms: 0 };
  const s = await startSets(zone, plugin("set_name4: c4, timeout: 10m, batch_size: 10, queue_size: 100, batch_interval: 1h"), { clockShift });
  try {
    const names = Array.from({ length: 40 }, (_, i) => `n${i}.batch.test`);
    distinct24s(40, 40).forEach((ip, i) => zone.names.set(names[i], { ips: [ip], ttl: 60 }));
    // All at once: the batch is full several times while a write runs.
    await Promise.all(names.map((n) => query(s.udpPort, n, "A")));
    await vi.waitFor(async () => expect((await counters(s, "ipset")).writes).toBe(4), { timeout: 10_000 });
    expect((await ipsetEntries(ns, "c4")).size).toBe(40);
    // Again, twice: remembered, not queued.
    for (let round = 0; round < 2; round++) await Promise.all(names.map((n) => query(s.udpPort, n, "A")));
    expect(await counters(s, "ipset")).toEqual({ entries: 40, dropped: 0, writes: 4, errors: 0 });
    // Past half the timeout (5 min), an answer queues its prefix again, so the entry is refreshed before it runs out.
    clockShift.ms += 5 * 60_000 + 1000;
    await query(s.udpPort, names[0], "A");
    expect((await counters(s, "ipset")).entries).toBe(41);
    expect((await writeNow(s)).body).toMatchObject({ ok: true, written: 1 });
  } finally {
    await s.stop();
  }
});

test("a full queue drops what does not fit (ipset_dropped_total); the dropped prefixes are queued by a later answer", async () => {
  zone.names.set("many.test", { ips: distinct24s(50, 10), ttl: 60 });
  const s = await startSets(zone, plugin("set_name4: d4, batch_size: 4, queue_size: 4, batch_interval: 1h"));
  try {
    await query(s.udpPort, "many.test", "A");
    expect(await counters(s, "ipset")).toMatchObject({ entries: 4, dropped: 6 });
    await vi.waitFor(async () => expect((await counters(s, "ipset")).writes).toBe(1), { timeout: 10_000 });
    // The 4 written are remembered; of the 6 dropped, 4 fit now.
    await query(s.udpPort, "many.test", "A");
    expect(await counters(s, "ipset")).toMatchObject({ entries: 8, dropped: 8 });
    await vi.waitFor(async () => expect((await counters(s, "ipset")).writes).toBe(2), { timeout: 10_000 });
    expect((await ipsetEntries(ns, "d4")).size).toBe(8);
  } finally {
    await s.stop();
  }
});

test("a write the tool refuses is counted, logged once at warn, and answered by POST write; its prefixes are queued again by the next answer", async () => {
  zone.names.set("late.test", { ips: ["100.64.1.1", "100.64.2.1"], ttl: 60 });
  const s = await startSets(zone, plugin("set_name4: later4, batch_interval: 1h"));
  try {
    await query(s.udpPort, "late.test", "A");
    const failed = await writeNow(s);
    expect(failed.body).toMatchObject({ ok: false, written: 0, failed: 2 });
    expect(String(failed.body.error)).toContain("The set with the given name does not exist");
    await query(s.udpPort, "late.test", "A");
    expect((await writeNow(s)).body).toMatchObject({ ok: false, failed: 2 });
    expect(await counters(s, "ipset")).toEqual({ entries: 4, dropped: 0, writes: 0, errors: 2 });
    expect(s.logs.filter((l) => l.level === 40 && String(l.msg).startsWith("ipset: write failed"))).toHaveLength(1);
    await ns.exec([ns.ipset, "create", "later4", "hash:net", "family", "inet"]);
    await query(s.udpPort, "late.test", "A");
    expect((await writeNow(s)).body).toEqual({ ok: true, written: 2, failed: 0, error: null });
    expect([...(await ipsetEntries(ns, "later4")).keys()].sort()).toEqual(["100.64.1.0/24", "100.64.2.0/24"]);
    expect(s.logs.some((l) => l.msg === "ipset: writing works again")).toBe(true);
  } finally {
    await s.stop();
  }
});

test("what is queued when the plugin goes (a shutdown) is written before it is gone", async () => {
  zone.names.set("bye.test", { ips: ["172.16.5.5", "172.16.9.9"], ttl: 60 });
  const s = await startSets(zone, plugin("set_name4: e4, mask4: 16, batch_interval: 1h"));
  await query(s.udpPort, "bye.test", "A");
  expect((await counters(s, "ipset")).writes).toBe(0);
  await s.stop();
  expect([...(await ipsetEntries(ns, "e4")).keys()]).toEqual(["172.16.0.0/16"]);
});

test("quick setup `ipset <name>,inet,<mask> <name>,inet6,<mask>`: the default program is ipset, found on PATH", async () => {
  zone.names.set("quick.test", { ips: ["192.0.2.77", "2001:db8:1:2:3::1"], ttl: 60 });
  await withToolOnPath(ns, "ipset", async () => {
    const s = await startSets(zone, "", { exec: "ipset f4,inet,32 a6,inet6,64" });
    try {
      await query(s.udpPort, "quick.test", "A");
      await query(s.udpPort, "quick.test", "AAAA");
      // The default batch_interval (200 ms) writes them.
      await vi.waitFor(async () => expect((await counters(s, "ipset", "qs.exec.main.1.ipset")).writes).toBeGreaterThan(0), { timeout: 10_000 });
      await vi.waitFor(async () => expect([...(await ipsetEntries(ns, "a6")).keys()]).toContain("2001:db8:1:2::/64"), { timeout: 10_000 });
      expect([...(await ipsetEntries(ns, "f4")).keys()]).toEqual(["192.0.2.77"]);
    } finally {
      await s.stop();
    }
  });
});

test("a quick setup's queue is written at shutdown too: its writer, a child of the quick-setup actor, lives until the plugin's destroy returns", async () => {
  zone.names.set("quickbye.test", { ips: ["192.0.2.201"], ttl: 60 });
  await withToolOnPath(ns, "ipset", async () => {
    const s = await startSets(zone, "", { exec: "ipset f4,inet,32" });
    const actors = (await (await s.api("/api/actors")).json()) as { actors: { id: string; state: unknown }[] };
    expect(actors.actors.filter((a) => a.id.endsWith("/quick:qs.exec.main.1.ipset/ipset:qs.exec.main.1.ipset")).map((a) => a.state)).toEqual(["idle"]);
    await query(s.udpPort, "quickbye.test", "A");
    // Well inside the default 200 ms batch interval: only the destroy can write it.
    await s.stop();
  });
  expect([...(await ipsetEntries(ns, "f4")).keys()]).toContain("192.0.2.201");
});

test("a command that is no executable fails the start, located at the plugin's command", async () => {
  await expect(startSets(zone, `  - tag: sets
    type: ipset
    args: { set_name4: a4, command: [./no-such-ipset] }`)).rejects.toThrow(/'\.\/no-such-ipset' \(.*no-such-ipset\) is not an executable file/);
});

test("the exposition with ipset and nftset counters passes `promtool check metrics` with no output", async () => {
  const promtool = requireTool("promtool");
  await ns.exec([ns.nft, "add table inet prom"]);
  await ns.exec([ns.nft, "add set inet prom s4 { type ipv4_addr; flags interval; }"]);
  zone.names.set("prom.test", { ips: ["192.0.2.1", "198.51.100.2"], ttl: 60 });
  const nft = JSON.stringify([...ns.prefix, ns.nft]);
  const s = await startSets(zone, `${plugin("set_name4: g4, batch_interval: 1h")}
  - tag: nft
    type: nftset
    args: { command: ${nft}, ipv4: { table_family: inet, table_name: prom, set_name: s4 }, queue_size: 1, batch_size: 1, batch_interval: 1h }`, { exec: "$sets\n      - exec: $nft" });
  try {
    await query(s.udpPort, "prom.test", "A");
    await writeNow(s);
    const text = await (await s.api("/api/metrics")).text();
    expect(text).toMatch(/^nftset_dropped_total\{plugin_tag="nft"\} 1$/m);
    const r = spawnSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
    expect([r.status, `${r.stdout}${r.stderr}`]).toEqual([0, ""]);
  } finally {
    await s.stop();
  }
});
