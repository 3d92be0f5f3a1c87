// `nftset` against the kernel, as ipset.test.ts does it: Sluice here, `nft` inside a network
// namespace of the test's own (`command: [ip, netns, exec, <ns>, nft]`), the sets listed there with
// `nft -j`. The structured targets, the flat form and the quick setup; interval elements with their
// timeouts, an element already there refreshed, bare addresses for a full-length mask, batches, a
// failing write (one transaction: nothing applied). The queue's bound is ipset.test.ts's (shared code).
import { afterAll, beforeAll, expect, test, vi } from "vitest";
import { query } from "../helpers/dns.js";
import { makeNetns, nftEntries, withToolOnPath, type Netns } from "../helpers/netns.js";
import { counters, distinct24s, startSets, startZone, writeNow, type Zone } from "./sets-helpers.js";

let ns: Netns;
let zone: Zone;
let command = "";

beforeAll(async () => {
  ns = await makeNetns();
  zone = await startZone();
  command = JSON.stringify([...ns.prefix, ns.nft]);
  await ns.exec([ns.nft, "add table inet fw"]);
  for (const [name, type] of [
    ["s4", "ipv4_addr"],
    ["s6", "ipv6_addr"],
    ["t4", "ipv4_addr"],
    ["b4", "ipv4_addr"],
    ["q4", "ipv4_addr"],
    ["q6", "ipv6_addr"],
  ]) {
    await ns.exec([ns.nft, `add set inet fw ${name} { type ${type}; flags interval, timeout; }`]);
  }
  await ns.exec([ns.nft, "add table ip legacy"]);
  await ns.exec([ns.nft, "add set ip legacy plain4 { type ipv4_addr; }"]);
  await ns.exec([ns.nft, "add table ip6 legacy6"]);
  await ns.exec([ns.nft, "add set ip6 legacy6 net6 { type ipv6_addr; flags interval; }"]);
});
afterAll(async () => {
  await zone?.responder.close();
  await ns?.remove();
});

const plugin = (args: string): string => `  - tag: sets
    type: nftset
    args: { command: ${command}, ${args} }`;

test("structured ipv4/ipv6 targets: prefixes masked to each mask, with the timeout; an element already there takes the new timeout", async () => {
  zone.names.set("dual.test", { ips: ["198.18.1.1", "198.18.1.99", "198.19.0.1", "2001:db8:5:6::1"], ttl: 60 });
  // Already in the set with 100 s left: nft's add alone would leave it so.
  await ns.exec([ns.nft, "add element inet fw s4 { 198.19.0.0/24 timeout 100s }"]);
  const s = await startSets(
    zone,
    plugin(`ipv4: { table_family: inet, table_name: fw, set_name: s4 }, ipv6: { table_family: inet, table_name: fw, set_name: s6, mask: 56 }, timeout: 2h, batch_interval: 1h`),
  );
  try {
    await query(s.udpPort, "dual.test", "A");
    await query(s.udpPort, "dual.test", "AAAA");
    expect(await writeNow(s)).toEqual({ status: 200, body: { ok: true, written: 3, failed: 0, error: null } });
    const v4 = await nftEntries(ns, "inet", "fw", "s4");
    expect([...v4.keys()].sort()).toEqual(["198.18.1.0/24", "198.19.0.0/24"]);
    for (const [prefix, left] of v4) expect(left, prefix).toBeGreaterThan(7190);
    const v6 = await nftEntries(ns, "inet", "fw", "s6");
    expect([...v6.keys()]).toEqual(["2001:db8:5::/56"]);
    expect(await counters(s, "nftset")).toEqual({ entries: 3, dropped: 0, writes: 1, errors: 0 });
  } finally {
    await s.stop();
  }
});

test("the flat form (table_family4, table_name4, set_name4, mask4, …): a full-length mask writes bare addresses; no timeout writes none", async () => {
  zone.names.set("flat.test", { ips: ["192.0.2.1", "192.0.2.2", "2001:db8:77::1"], ttl: 60 });
  const s = await startSets(zone, plugin("table_family4: ip, table_name4: legacy, set_name4: plain4, mask4: 32, table_family6: ip6, table_name6: legacy6, set_name6: net6, batch_interval: 1h"));
  try {
    await query(s.udpPort, "flat.test", "A");
    await query(s.udpPort, "flat.test", "AAAA");
    expect((await writeNow(s)).body).toEqual({ ok: true, written: 3, failed: 0, error: null });
    expect(Object.fromEntries(await nftEntries(ns, "ip", "legacy", "plain4"))).toEqual({ "192.0.2.1": null, "192.0.2.2": null });
    // mask6 defaults to 48.
    expect(Object.fromEntries(await nftEntries(ns, "ip6", "legacy6", "net6"))).toEqual({ "2001:db8:77::/48": null });
  } finally {
    await s.stop();
  }
});

test("batches of batch_size: 12 new prefixes at once are 2 runs of nft", async () => {
  const names = Array.from({ length: 12 }, (_, i) => `q${i}.nft.test`);
  distinct24s(70, 12).forEach((ip, i) => zone.names.set(names[i], { ips: [ip], ttl: 60 }));
  const s = await startSets(zone, plugin("ipv4: { table_family: inet, table_name: fw, set_name: t4, mask: 24 }, timeout: 10m, batch_size: 6, queue_size: 12, batch_interval: 1h"));
  try {
    await Promise.all(names.map((n) => query(s.udpPort, n, "A")));
    await vi.waitFor(async () => expect((await counters(s, "nftset")).writes).toBe(2), { timeout: 10_000 });
    expect((await nftEntries(ns, "inet", "fw", "t4")).size).toBe(12);
    expect(await counters(s, "nftset")).toEqual({ entries: 12, dropped: 0, writes: 2, errors: 0 });
  } finally {
    await s.stop();
  }
});

test("a write nft refuses (a set that is not there) applies nothing of its batch and is counted; the next answer queues it again", async () => {
  zone.names.set("gone.nft.test", { ips: ["203.0.113.9", "2001:db8:99::9"], ttl: 60 });
  const s = await startSets(zone, plugin("ipv4: { table_family: inet, table_name: fw, set_name: b4 }, ipv6: { table_family: inet, table_name: fw, set_name: nosuch6 }, batch_interval: 1h"));
  try {
    await query(s.udpPort, "gone.nft.test", "A");
    await query(s.udpPort, "gone.nft.test", "AAAA");
    const failed = await writeNow(s);
    expect(failed.body).toMatchObject({ ok: false, written: 0, failed: 2 });
    expect(String(failed.body.error)).toMatch(/No such file or directory[\s\S]*nosuch6/);
    // One transaction: the IPv4 element of the same batch is not there either.
    expect((await nftEntries(ns, "inet", "fw", "b4")).size).toBe(0);
    expect(await counters(s, "nftset")).toEqual({ entries: 2, dropped: 0, writes: 0, errors: 1 });
    await ns.exec([ns.nft, "add set inet fw nosuch6 { type ipv6_addr; flags interval; }"]);
    await query(s.udpPort, "gone.nft.test", "A");
    await query(s.udpPort, "gone.nft.test", "AAAA");
    expect((await writeNow(s)).body).toEqual({ ok: true, written: 2, failed: 0, error: null });
    expect([...(await nftEntries(ns, "inet", "fw", "nosuch6")).keys()]).toEqual(["2001:db8:99::/48"]);
  } finally {
    await s.stop();
  }
});

test("quick setup `nftset <family>,<table>,<set>,ipv4_addr|ipv6_addr,<mask>`: the default program is nft, found on PATH", async () => {
  zone.names.set("quick.nft.test", { ips: ["100.100.1.1", "2001:db8:abcd:12::1"], ttl: 60 });
  await withToolOnPath(ns, "nft", async () => {
    const s = await startSets(zone, "", { exec: "nftset inet,fw,q4,ipv4_addr,16 inet,fw,q6,ipv6_addr,64" });
    try {
      await query(s.udpPort, "quick.nft.test", "A");
      await query(s.udpPort, "quick.nft.test", "AAAA");
      await vi.waitFor(async () => expect((await counters(s, "nftset", "qs.exec.main.1.nftset")).writes).toBeGreaterThan(0), { timeout: 10_000 });
      await vi.waitFor(async () => expect([...(await nftEntries(ns, "inet", "fw", "q6")).keys()]).toEqual(["2001:db8:abcd:12::/64"]), { timeout: 10_000 });
      expect([...(await nftEntries(ns, "inet", "fw", "q4")).keys()]).toEqual(["100.100.0.0/16"]);
    } finally {
      await s.stop();
    }
  });
});
