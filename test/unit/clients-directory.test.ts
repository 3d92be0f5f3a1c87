// The `clients` directory on its own, with DnsContext objects built here: the identity sources and
// their precedence, the memo (an origin is resolved once; what the control plane changes forgets it),
// unnamed clients kept at most max_seen (the least recently seen go), clients named through the API
// taking over what was seen of them (and giving it back when removed), group pauses, the neighbour
// table, and the state file's seen clients put back.
import { describe, expect, test } from "vitest";
import { EDNS_OPTION } from "../../src/dns/constants.js";
import { encodeEcs } from "../../src/dns/ecs.js";
import { parseIP } from "../../src/dns/ip.js";
import { decodeMessage, type EdnsOption } from "../../src/dns/message.js";
import { DnsContext } from "../../src/engine/context.js";
import type { Cell } from "../../src/observability/metrics.js";
import type { ClientDecl, ClientsArgs } from "../../src/plugins/providers/clients/args.js";
import { Directory, MAC_OPTION, type ClientRecord, type SeenClient } from "../../src/plugins/providers/clients/directory.js";
import { buildQuery } from "../helpers/dns.js";

const client = (name: string, ids: Partial<Omit<ClientDecl, "name">> = {}): ClientDecl => ({ name, addresses: [], macs: [], ids: [], groups: [], ...ids });
const named = (name: string, ids: Partial<Omit<ClientDecl, "name">> = {}): ClientRecord => ({ ...client(name, ids), source: "api" });

function makeArgs(over: Partial<ClientsArgs> = {}): ClientsArgs {
  return {
    clients: [],
    groups: [],
    pause: [],
    trusted_forwarders: [],
    trust_client_ids: false,
    tls_server_names: [],
    neighbour_refresh: "0s",
    hostnames: null,
    state_file: "clients.state.json",
    state_interval: "60s",
    hostname_interval: "10s",
    max_seen: 1000,
    ...over,
  };
}

interface Made {
  dir: Directory;
  clock: { ms: number };
  cells: Map<string, Cell>;
}

function make(over: Partial<ClientsArgs> = {}): Made {
  const clock = { ms: 1_000_000 };
  const cells = new Map<string, Cell>();
  const groupCell = (group: string): Cell => {
    let c = cells.get(group);
    if (!c) cells.set(group, (c = { value: 0 }));
    return c;
  };
  return { dir: new Directory(makeArgs(over), { now: () => clock.ms, groupCell }), clock, cells };
}

interface From {
  options?: EdnsOption[];
  id?: string;
  sni?: string;
}

function ctx(ip: string, from: From = {}): DnsContext {
  const query = decodeMessage(buildQuery("who.test", "A", from.options ? { edns: { options: from.options } } : {}));
  return new DnsContext(query, null, ip, 5300, from.sni !== undefined ? "dot" : from.id !== undefined ? "doh" : "udp", undefined, -1, from.id ?? null, from.sni ?? null);
}

const macOption = (mac: string): EdnsOption => ({ code: MAC_OPTION, data: Buffer.from(mac.replaceAll(":", ""), "hex") });
function ecsOption(address: string, prefix: number): EdnsOption {
  const ip = parseIP(address) as Uint8Array;
  return { code: EDNS_OPTION.ECS, data: encodeEcs({ family: ip.length === 4 ? 1 : 2, sourcePrefix: prefix, scopePrefix: 0, address: ip }) };
}

const nameOf = (d: Directory, c: DnsContext): string | null => d.identify(c)?.name ?? null;
const unnamedKeys = (d: Directory): string[] => d.seen().filter((s) => s.name === null).map((s) => s.key);

describe("identity sources and precedence", () => {
  const clients = [
    client("wide", { addresses: ["192.168.1.0/24"] }),
    client("anna", { addresses: ["192.168.1.37"], groups: ["kids"] }),
    client("lab", { addresses: ["192.168.1.32/28"] }),
    client("tv", { macs: ["AA-BB-CC-DD-EE-01"] }),
    client("ben", { ids: ["Ben"], groups: ["kids"] }),
    client("v6", { addresses: ["fd00::/64"] }),
  ];
  const groups = [
    { name: "kids", addresses: [] },
    { name: "guests", addresses: ["10.5.0.0/16"] },
    { name: "lan", addresses: ["192.168.0.0/16"] },
  ];

  test("the longest address prefix wins, whatever the declaration order; IPv4-mapped sources count as IPv4", () => {
    const { dir } = make({ clients, groups });
    expect(nameOf(dir, ctx("192.168.1.37"))).toBe("anna");
    expect(nameOf(dir, ctx("192.168.1.40"))).toBe("lab");
    expect(nameOf(dir, ctx("192.168.1.3"))).toBe("wide");
    expect(nameOf(dir, ctx("::ffff:192.168.1.37"))).toBe("anna");
    expect(nameOf(dir, ctx("fd00::5%eth0"))).toBe("v6");
    expect(nameOf(dir, ctx("10.0.0.1"))).toBe(null);
  });

  test("groups: the client's own, then those holding its address, in declaration order; memberOf has the name too", () => {
    const { dir } = make({ clients, groups });
    const anna = dir.identify(ctx("192.168.1.37"));
    expect(anna?.groups).toEqual(["kids", "lan"]);
    expect([...(anna?.memberOf ?? [])].sort()).toEqual(["anna", "kids", "lan"]);
    const guest = dir.identify(ctx("10.5.3.3"));
    expect(guest).toMatchObject({ name: null, groups: ["guests"], paused: false });
    expect([...(guest?.memberOf ?? [])]).toEqual(["guests"]);
  });

  test("the MAC option counts from a trusted forwarder only, and comes before the address", () => {
    const { dir } = make({ clients, groups, trusted_forwarders: ["127.0.0.0/8"] });
    expect(nameOf(dir, ctx("127.0.0.1", { options: [macOption("aa:bb:cc:dd:ee:01")] }))).toBe("tv");
    expect(nameOf(dir, ctx("192.168.1.37", { options: [macOption("aa:bb:cc:dd:ee:01")] }))).toBe("anna");
    const both = make({ clients, groups, trusted_forwarders: ["192.168.1.37"] }).dir;
    expect(nameOf(both, ctx("192.168.1.37", { options: [macOption("aa:bb:cc:dd:ee:01")] }))).toBe("tv");
    // Not six bytes: no MAC.
    expect(nameOf(dir, ctx("127.0.0.1", { options: [{ code: MAC_OPTION, data: Buffer.from("aabbcc", "hex") }] }))).toBe(null);
  });

  test("the ECS address counts from a trusted forwarder only; a source prefix of 0 says nothing", () => {
    const { dir } = make({ clients, groups, trusted_forwarders: ["127.0.0.1"] });
    expect(nameOf(dir, ctx("127.0.0.1", { options: [ecsOption("192.168.1.37", 32)] }))).toBe("anna");
    expect(nameOf(dir, ctx("127.0.0.1", { options: [ecsOption("192.168.1.37", 24)] }))).toBe("wide");
    expect(nameOf(dir, ctx("127.0.0.2", { options: [ecsOption("192.168.1.37", 32)] }))).toBe(null);
    expect(nameOf(dir, ctx("192.168.1.40", { options: [ecsOption("192.168.1.37", 32)] }))).toBe("lab");
    expect(nameOf(dir, ctx("192.168.1.40", { options: [ecsOption("0.0.0.0", 0)] }))).toBe("lab");
    const trusted = make({ clients, groups, trusted_forwarders: ["192.168.1.40"] }).dir;
    expect(nameOf(trusted, ctx("192.168.1.40", { options: [ecsOption("0.0.0.0", 0)] }))).toBe("lab");
    // The MAC option beats the ECS address from the same forwarder.
    expect(nameOf(dir, ctx("127.0.0.1", { options: [ecsOption("192.168.1.37", 32), macOption("aa:bb:cc:dd:ee:01")] }))).toBe("tv");
    // The ECS address decides the groups too.
    expect(dir.identify(ctx("127.0.0.1", { options: [ecsOption("10.5.1.1", 32)] }))?.groups).toEqual(["guests"]);
  });

  test("a client id names a client only when nothing else does, unless trust_client_ids", () => {
    const { dir } = make({ clients, groups });
    expect(nameOf(dir, ctx("10.0.0.1", { id: "ben" }))).toBe("ben");
    expect(nameOf(dir, ctx("192.168.1.37", { id: "ben" }))).toBe("anna");
    expect(nameOf(dir, ctx("10.0.0.1", { id: "nobody" }))).toBe(null);
    const trusting = make({ clients, groups, trust_client_ids: true }).dir;
    expect(nameOf(trusting, ctx("192.168.1.37", { id: "ben" }))).toBe("ben");
    // Before the MAC as well.
    expect(nameOf(make({ clients, groups, trust_client_ids: true, trusted_forwarders: ["127.0.0.1"] }).dir, ctx("127.0.0.1", { id: "ben", options: [macOption("aa:bb:cc:dd:ee:01")] }))).toBe("ben");
  });

  test("DoT: the first label of <id>.<a tls_server_names entry>; without entries, a first label some client declares as an id", () => {
    const listed = make({ clients, groups, tls_server_names: ["DNS.example.net."] }).dir;
    expect(nameOf(listed, ctx("10.0.0.1", { sni: "ben.dns.example.net" }))).toBe("ben");
    expect(nameOf(listed, ctx("10.0.0.1", { sni: "ben.other.example" }))).toBe(null);
    expect(nameOf(listed, ctx("10.0.0.1", { sni: "dns.example.net" }))).toBe(null);
    expect(nameOf(listed, ctx("192.168.1.37", { sni: "ben.dns.example.net" }))).toBe("anna");
    const unlisted = make({ clients, groups }).dir;
    expect(nameOf(unlisted, ctx("10.0.0.1", { sni: "ben.anything.example" }))).toBe("ben");
    expect(nameOf(unlisted, ctx("10.0.0.1", { sni: "carl.anything.example" }))).toBe(null);
    expect(unnamedKeys(unlisted)).toEqual(["10.0.0.1"]);
    // With entries, an undeclared id still tells an unnamed client apart.
    listed.identify(ctx("10.0.0.1", { sni: "carl.dns.example.net" }));
    expect(unnamedKeys(listed)).toContain("id carl");
  });

  test("the neighbour table's MAC comes before the address; a trusted forwarder's own MAC is not its clients'", () => {
    const { dir } = make({ clients: [...clients, client("router", { macs: ["02:00:00:00:00:01"] })], groups, trusted_forwarders: ["192.168.1.1"] });
    dir.setNeighbours(new Map([["192.168.1.37", "aa:bb:cc:dd:ee:01"], ["192.168.1.1", "02:00:00:00:00:01"]]));
    expect(nameOf(dir, ctx("192.168.1.37"))).toBe("tv");
    expect(nameOf(dir, ctx("192.168.1.1"))).toBe("router");
    expect(nameOf(dir, ctx("192.168.1.1", { options: [ecsOption("192.168.1.40", 32)] }))).toBe("lab");
    // The ECS address's own neighbour entry does count.
    expect(nameOf(dir, ctx("192.168.1.1", { options: [ecsOption("192.168.1.37", 32)] }))).toBe("tv");
  });
});

describe("the memo", () => {
  test("an origin is resolved once: the same identity object, counted on every query", () => {
    const { dir, clock, cells } = make({ clients: [client("anna", { addresses: ["192.168.1.37"], groups: ["kids"] })], groups: [{ name: "kids", addresses: [] }] });
    const first = dir.identify(ctx("192.168.1.37"));
    clock.ms += 5000;
    expect(dir.identify(ctx("192.168.1.37"))).toBe(first);
    expect(dir.identify(ctx("192.168.1.37"))).toBe(first);
    expect(cells.get("kids")?.value).toBe(3);
    expect(dir.seen()).toEqual([{ name: "anna", key: "anna", address: "192.168.1.37", mac: null, id: null, hostname: null, first_seen_ms: 1_000_000, last_seen_ms: 1_005_000, queries: 3 }]);
  });

  test("a new neighbour table or a name given forgets it", () => {
    const { dir } = make({ clients: [client("tv", { macs: ["aa:bb:cc:dd:ee:01"] })] });
    const before = dir.identify(ctx("192.168.1.5"));
    expect(before?.name).toBe(null);
    dir.setNeighbours(new Map([["192.168.1.5", "aa:bb:cc:dd:ee:01"]]));
    expect(nameOf(dir, ctx("192.168.1.5"))).toBe("tv");
    dir.setNamed([named("desk", { addresses: ["192.168.1.6"] })]);
    expect(nameOf(dir, ctx("192.168.1.6"))).toBe("desk");
    // A DoT server name's id as well (without tls_server_names it counts once a client has it).
    expect(nameOf(dir, ctx("10.0.0.1", { sni: "zed.example.net" }))).toBe(null);
    dir.setNamed([named("zed", { ids: ["zed"] })]);
    expect(nameOf(dir, ctx("10.0.0.1", { sni: "zed.example.net" }))).toBe("zed");
  });
});

describe("pauses", () => {
  test("setPaused: the clients of a paused group (by membership or by address) are paused, the others not", () => {
    const { dir } = make({
      clients: [client("anna", { addresses: ["192.168.1.37"], groups: ["kids"] }), client("dad", { addresses: ["192.168.1.2"] })],
      groups: [{ name: "kids", addresses: [] }, { name: "guests", addresses: ["10.5.0.0/16"] }],
      pause: ["$ads"],
    });
    expect([...dir.pausable]).toEqual(["ads"]);
    expect(dir.identify(ctx("192.168.1.37"))?.paused).toBe(false);
    dir.setPaused(new Set(["kids"]));
    expect(dir.identify(ctx("192.168.1.37"))?.paused).toBe(true);
    expect(dir.identify(ctx("192.168.1.2"))?.paused).toBe(false);
    expect(dir.identify(ctx("10.5.0.9"))?.paused).toBe(false);
    dir.setPaused(new Set(["guests"]));
    expect(dir.identify(ctx("192.168.1.37"))?.paused).toBe(false);
    expect(dir.identify(ctx("10.5.0.9"))?.paused).toBe(true);
    dir.setPaused(new Set());
    expect(dir.identify(ctx("10.5.0.9"))?.paused).toBe(false);
  });
});

describe("seen clients", () => {
  test("max_seen: the least recently seen unnamed client goes first, and a forgotten origin is seen anew", () => {
    const { dir, clock } = make({ max_seen: 3 });
    for (const ip of ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) {
      clock.ms += 1000;
      dir.identify(ctx(ip));
    }
    // 10.0.0.1 asks again: 10.0.0.2 is now the least recently seen.
    const one = dir.identify(ctx("10.0.0.1"));
    dir.identify(ctx("10.0.0.4"));
    expect(unnamedKeys(dir).sort()).toEqual(["10.0.0.1", "10.0.0.3", "10.0.0.4"]);
    expect(dir.evicted).toBe(1);
    // The other origins stay remembered.
    expect(dir.identify(ctx("10.0.0.1"))).toBe(one);
    dir.identify(ctx("10.0.0.5"));
    expect(unnamedKeys(dir).sort()).toEqual(["10.0.0.1", "10.0.0.4", "10.0.0.5"]);
    expect(dir.evicted).toBe(2);
    // 10.0.0.3 was remembered with its forgotten entry: it is counted in a new one.
    clock.ms += 1000;
    dir.identify(ctx("10.0.0.3"));
    const back = dir.seen().find((s) => s.key === "10.0.0.3");
    expect(back).toMatchObject({ queries: 1, first_seen_ms: clock.ms });
    expect(dir.seen()).toHaveLength(3);
    // Named clients are not counted against max_seen.
    dir.setNamed([named("a", { addresses: ["10.1.0.1"] }), named("b", { addresses: ["10.1.0.2"] }), named("c", { addresses: ["10.1.0.3"] })]);
    for (const ip of ["10.1.0.1", "10.1.0.2", "10.1.0.3"]) dir.identify(ctx(ip));
    expect(dir.seen()).toHaveLength(6);
  });

  test("takeFresh hands out each newly seen client once", () => {
    const { dir } = make();
    dir.identify(ctx("10.0.0.1"));
    dir.identify(ctx("10.0.0.1"));
    dir.identify(ctx("10.0.0.2"));
    expect(dir.takeFresh().map((s) => s.key)).toEqual(["10.0.0.1", "10.0.0.2"]);
    expect(dir.takeFresh()).toEqual([]);
    dir.setHostname("10.0.0.2", "printer.lan");
    expect(dir.seen().find((s) => s.key === "10.0.0.2")?.hostname).toBe("printer.lan");
  });

  test("setNamed: what was seen of a client moves under its new name, merged with what the name had; removed, it goes back", () => {
    const { dir, clock } = make({ trusted_forwarders: ["127.0.0.1"] });
    dir.identify(ctx("10.0.0.7"));
    clock.ms += 1000;
    dir.identify(ctx("127.0.0.1", { options: [macOption("aa:bb:cc:dd:ee:07")] }));
    dir.identify(ctx("127.0.0.1", { options: [macOption("aa:bb:cc:dd:ee:07")] }));
    expect(unnamedKeys(dir)).toEqual(["10.0.0.7", "mac aa:bb:cc:dd:ee:07"]);
    // One client owning both: the two entries become one, keeping the latest address.
    dir.setNamed([named("laptop", { addresses: ["10.0.0.7"], macs: ["aa:bb:cc:dd:ee:07"] })]);
    expect(dir.seen()).toEqual([{ name: "laptop", key: "laptop", address: "127.0.0.1", mac: "aa:bb:cc:dd:ee:07", id: null, hostname: null, first_seen_ms: 1_000_000, last_seen_ms: 1_001_000, queries: 3 }]);
    expect(nameOf(dir, ctx("10.0.0.7"))).toBe("laptop");
    expect(dir.seen()[0].queries).toBe(4);
    // Removed: it is an unnamed client again, under the key a query from it would have.
    dir.setNamed([]);
    expect(dir.seen()).toMatchObject([{ name: null, key: "mac aa:bb:cc:dd:ee:07", queries: 4 }]);
    dir.identify(ctx("127.0.0.1", { options: [macOption("aa:bb:cc:dd:ee:07")] }));
    expect(dir.seen()).toMatchObject([{ name: null, key: "mac aa:bb:cc:dd:ee:07", queries: 5 }]);
    // Renamed (removed and added under another name): the other name takes it.
    dir.setNamed([named("work-laptop", { macs: ["aa:bb:cc:dd:ee:07"] })]);
    dir.setNamed([named("old", { macs: ["aa:bb:cc:dd:ee:07"] })]);
    expect(dir.seen()).toMatchObject([{ name: "old", key: "old", queries: 5 }]);
    expect(dir.clients().map((c) => [c.name, c.source])).toEqual([["old", "api"]]);
  });

  test("a declared client keeps its name when the API names another with the same identifier", () => {
    const { dir } = make({ clients: [client("anna", { addresses: ["192.168.1.37"] })] });
    dir.setNamed([named("anna2", { addresses: ["192.168.1.37"] })]);
    expect(nameOf(dir, ctx("192.168.1.37"))).toBe("anna");
    expect(dir.clients().map((c) => c.source)).toEqual(["config", "api"]);
  });

  test("setNeighbours: an unnamed client seen by address before its MAC was known is kept under its MAC (or its name)", () => {
    const { dir } = make({ clients: [client("tv", { macs: ["aa:bb:cc:dd:ee:01"] })] });
    dir.identify(ctx("192.168.1.5"));
    dir.identify(ctx("192.168.1.6"));
    dir.identify(ctx("192.168.1.6"));
    dir.setNeighbours(new Map([["192.168.1.5", "aa:bb:cc:dd:ee:01"], ["192.168.1.6", "aa:bb:cc:dd:ee:06"]]));
    expect(dir.seen()).toMatchObject([
      { name: "tv", key: "tv", address: "192.168.1.5", mac: "aa:bb:cc:dd:ee:01", queries: 1 },
      { name: null, key: "mac aa:bb:cc:dd:ee:06", address: "192.168.1.6", queries: 2 },
    ]);
    dir.identify(ctx("192.168.1.6"));
    expect(dir.seen()[1].queries).toBe(3);
  });

  test("restoreSeen: a remembered name stays while a client has it; other entries are placed as a query would place them", () => {
    const { dir } = make({ clients: [client("anna", { addresses: ["192.168.1.37"] }), client("tv", { macs: ["aa:bb:cc:dd:ee:01"] })] });
    const at = (over: Partial<SeenClient>): SeenClient => ({ name: null, key: "", address: "192.168.1.9", mac: null, id: null, hostname: null, first_seen_ms: 1, last_seen_ms: 2, queries: 3, ...over });
    dir.restoreSeen([
      at({ name: "anna", key: "anna", address: "192.168.1.37" }),
      at({ name: "gone", key: "gone", address: "192.168.1.9" }),
      at({ key: "mac aa:bb:cc:dd:ee:01", mac: "aa:bb:cc:dd:ee:01" }),
      at({ key: "192.168.1.10", address: "192.168.1.10" }),
    ]);
    expect(dir.seen().map((s) => [s.name, s.key])).toEqual([
      ["anna", "anna"],
      ["tv", "tv"],
      [null, "192.168.1.9"],
      [null, "192.168.1.10"],
    ]);
    dir.identify(ctx("192.168.1.9"));
    expect(dir.seen().find((s) => s.key === "192.168.1.9")?.queries).toBe(4);
  });
});
