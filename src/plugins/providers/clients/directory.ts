// The data plane of `clients`: who asked, from what the query carries. Runs once per query, before
// the sequence, from the server's handler. Results are remembered per origin (address, and MAC or id
// when there are any), so a query from a known origin costs a map lookup and two counter updates;
// the control plane (names given through the API, group pauses, the neighbour table) replaces the
// index and forgets what was remembered.
//
// Precedence, first that names a client wins: (with trust_client_ids) the DoH/DoT client id; the MAC
// (EDNS option 65001 from a trusted forwarder, else the kernel's neighbour table for the address
// below); the longest address prefix (the ECS address when a trusted forwarder sent one with a source
// prefix above 0, else the source address); the client id.

import { EDNS_OPTION } from "../../../dns/constants.js";
import { decodeEcs } from "../../../dns/ecs.js";
import { formatIP, parseIP, unmapIPv4 } from "../../../dns/ip.js";
import { clientIdOf, type ClientDirectory, type ClientIdentity } from "../../../engine/clients.js";
import type { DnsContext } from "../../../engine/context.js";
import type { Cell } from "../../../observability/metrics.js";
import { macOf, type ClientDecl, type ClientsArgs } from "./args.js";
import { PrefixTable } from "./prefixes.js";

/** The EDNS option dnsmasq's `add-mac` puts the client's MAC address in. */
export const MAC_OPTION = 65001;
/** Origins remembered at most; the memory is forgotten whole when full. */
const MEMO_LIMIT = 8192;
/** Newly seen clients waiting for a host-name lookup, at most. */
const FRESH_LIMIT = 256;

/** A client the directory can name: declared in the configuration, or named through the API. */
export interface ClientRecord extends ClientDecl {
  source: "config" | "api";
}

/** What was learned about a client from its queries. */
export interface SeenClient {
  /** The client's name, or null when no declared or named client matches it. */
  name: string | null;
  /** How an unnamed client is told apart: `mac <mac>`, `id <id>` or its address. */
  key: string;
  address: string;
  mac: string | null;
  id: string | null;
  hostname: string | null;
  first_seen_ms: number;
  last_seen_ms: number;
  queries: number;
}

interface Hit {
  identity: ClientIdentity;
  seen: SeenClient | null;
  address: string;
  groupCells: Cell[];
}

interface Index {
  clients: Map<string, ClientRecord>;
  byMac: Map<string, ClientRecord>;
  byId: Map<string, ClientRecord>;
  prefixes: PrefixTable<ClientRecord>;
  groupPrefixes: PrefixTable<string>;
}

export interface DirectoryOptions {
  /** Unix ms (the process clock plus services.clockShift). */
  now(): number;
  /** The per-group query counter. */
  groupCell(group: string): Cell;
}

export class Directory implements ClientDirectory {
  readonly pausable: ReadonlySet<string>;
  private readonly groupOrder: string[];
  private readonly groupAddresses: Map<string, string[]>;
  private readonly trusted = new PrefixTable<true>();
  /** Source address → in trusted_forwarders (at most MEMO_LIMIT, then forgotten whole). */
  private readonly trustedSources = new Map<string, boolean>();
  /** DoT server name → the client id in it (depends on the ids declared: forgotten with the memo). */
  private serverNameIds = new Map<string, string | null>();
  private readonly serverNames: string[];
  private readonly trustIds: boolean;
  private readonly maxSeen: number;
  private declared: ClientRecord[];
  private named: ClientRecord[] = [];
  private paused: ReadonlySet<string> = new Set();
  private neighbours: ReadonlyMap<string, string> = new Map();
  private index: Index;
  private memo = new Map<string, Hit>();
  private readonly seenNamed = new Map<string, SeenClient>();
  private readonly seenUnnamed = new Map<string, SeenClient>();
  /** An unnamed client's query count when it was last placed at the end of `seenUnnamed`. */
  private readonly placedAt = new WeakMap<SeenClient, number>();
  private fresh: SeenClient[] = [];
  /** Unnamed clients forgotten to make room (max_seen). */
  evicted = 0;

  constructor(
    args: ClientsArgs,
    private readonly options: DirectoryOptions,
  ) {
    this.pausable = new Set(args.pause.map((t) => t.replace(/^\$/, "")));
    this.groupOrder = args.groups.map((g) => g.name);
    this.groupAddresses = new Map(args.groups.map((g) => [g.name, g.addresses]));
    for (const a of args.trusted_forwarders) this.trusted.add(a, true);
    this.serverNames = args.tls_server_names.map((n) => n.toLowerCase().replace(/\.$/, ""));
    this.trustIds = args.trust_client_ids;
    this.maxSeen = args.max_seen;
    this.declared = args.clients.map((c) => ({ ...c, source: "config" }));
    this.index = this.build();
  }

  /** Every client with a name: declared ones first, then those named through the API. */
  clients(): ClientRecord[] {
    return [...this.declared, ...this.named];
  }

  groups(): { name: string; addresses: string[] }[] {
    return this.groupOrder.map((name) => ({ name, addresses: this.groupAddresses.get(name) ?? [] }));
  }

  /**
   * Clients named through the API (replacing the previous list). Seen clients they match take their
   * name; what was seen of a client no longer named goes back to the unnamed ones.
   */
  setNamed(named: readonly ClientRecord[]): void {
    this.named = named.map((c) => ({ ...c, source: "api" }));
    this.rebuild();
    const moving: SeenClient[] = [];
    for (const [key, s] of this.seenUnnamed) {
      if (!this.lookup(s.mac, s.id, s.address)) continue;
      this.seenUnnamed.delete(key);
      moving.push(s);
    }
    for (const [name, s] of this.seenNamed) {
      if (this.index.clients.has(name)) continue;
      this.seenNamed.delete(name);
      moving.push(s);
    }
    for (const s of moving) this.place(s);
  }

  /** Groups whose blocking is paused now. */
  setPaused(groups: ReadonlySet<string>): void {
    this.paused = new Set(groups);
    // The index does not change: only the remembered identities carry `paused`.
    this.memo = new Map();
  }

  /**
   * Address → MAC, from the kernel's neighbour table. Unnamed clients seen by address before their
   * MAC was known are kept under their MAC from now on (and named, when a client declares it).
   */
  setNeighbours(table: ReadonlyMap<string, string>): void {
    this.neighbours = table;
    this.memo = new Map();
    const moving: SeenClient[] = [];
    for (const [key, s] of this.seenUnnamed) {
      const mac = s.mac === null ? table.get(s.address) : undefined;
      if (mac === undefined) continue;
      this.seenUnnamed.delete(key);
      s.mac = mac;
      moving.push(s);
    }
    for (const s of moving) this.place(s);
  }

  /** The neighbour table in use (address → MAC). */
  neighbourTable(): ReadonlyMap<string, string> {
    return this.neighbours;
  }

  /** What was seen, named clients first (for the list route and the state file). */
  seen(): SeenClient[] {
    return [...this.seenNamed.values(), ...this.seenUnnamed.values()];
  }

  /**
   * Puts back what a state file remembered (before the first query). An entry keeps its name while a
   * client has it; the others are placed as a query from them would be (a name given since, or unnamed).
   */
  restoreSeen(list: readonly SeenClient[]): void {
    this.memo = new Map();
    for (const s of list) {
      const named = s.name !== null && this.index.clients.has(s.name) ? this.seenNamed.get(s.name) : undefined;
      // Merged with what a data-plane worker reported before this generation took over (the primary of workers).
      if (named) mergeInto(named, s);
      else if (s.name !== null && this.index.clients.has(s.name)) this.seenNamed.set(s.name, { ...s, key: s.name });
      else this.place({ ...s });
    }
  }

  /** Adds a data-plane worker's news (queries since its last report) to what was seen (the primary of workers). */
  mergeSeen(list: readonly SeenClient[]): void {
    if (list.length === 0) return;
    this.memo = new Map();
    for (const s of list) this.place({ ...s });
  }

  /** Records a host name learned for a seen client (by its key, or its name when named). */
  setHostname(key: string, hostname: string): void {
    const s = this.seenUnnamed.get(key) ?? this.seenNamed.get(key);
    if (s) s.hostname = hostname;
  }

  /** Clients seen for the first time since the last call (bounded), for host-name lookups. */
  takeFresh(): SeenClient[] {
    const out = this.fresh;
    this.fresh = [];
    return out;
  }

  identify(ctx: DnsContext): ClientIdentity | null {
    let key = ctx.clientIp;
    let macData: Buffer | null = null;
    let ecsData: Buffer | null = null;
    const edns = ctx.query.edns;
    // Most queries carry an EDNS option (a cookie): whether their source is trusted is remembered too.
    if (edns !== null && edns.options.length > 0 && this.trusted.size > 0) {
      let trusted = this.trustedSources.get(ctx.clientIp);
      if (trusted === undefined) {
        const source = ctx.clientAddress;
        trusted = source !== null && this.trusted.longest(source) === true;
        if (this.trustedSources.size >= MEMO_LIMIT) this.trustedSources.clear();
        this.trustedSources.set(ctx.clientIp, trusted);
      }
      if (trusted) {
        for (const o of edns.options) {
          if (o.code === MAC_OPTION && o.data.length === 6) macData = o.data;
          // Source prefix 0: the client asked that its address not be passed on (RFC 7871).
          else if (o.code === EDNS_OPTION.ECS && o.data.length >= 4 && o.data[2] > 0) ecsData = o.data;
        }
        // The options' bytes as they came (decoded only when the origin is new): one string to build.
        if (ecsData !== null) key += ` ecs ${ecsData.toString("hex")}`;
        if (macData !== null) key += ` mac ${macData.toString("hex")}`;
      }
    }
    const id = ctx.clientId ?? (ctx.tlsServerName !== null ? this.serverNameId(ctx.tlsServerName) : null);
    if (id !== null) key += ` id ${id}`;
    let hit = this.memo.get(key);
    // An unnamed client forgotten to make room for others (max_seen) while its origin was remembered is seen anew.
    if (hit === undefined || (hit.seen !== null && hit.seen.name === null && this.seenUnnamed.get(hit.seen.key) !== hit.seen)) {
      hit = this.resolve(ctx, key, macData !== null ? formatMac(macData) : null, ecsData !== null ? (decodeEcs(ecsData)?.address ?? null) : null, id);
    }
    const seen = hit.seen;
    if (seen !== null) {
      seen.queries++;
      seen.last_seen_ms = this.options.now();
      seen.address = hit.address;
    }
    const cells = hit.groupCells;
    for (let i = 0; i < cells.length; i++) cells[i].value++;
    return hit.identity;
  }

  /** The id in a DoT server name (remembered: a connection's queries all ask with the same name). */
  private serverNameId(name: string): string | null {
    let id = this.serverNameIds.get(name);
    if (id === undefined) {
      id = this.idInServerName(name);
      if (this.serverNameIds.size >= MEMO_LIMIT) this.serverNameIds.clear();
      this.serverNameIds.set(name, id);
    }
    return id;
  }

  /** `<id>.<server name>`, or without server names a first label some client declares. */
  private idInServerName(name: string): string | null {
    const dot = name.indexOf(".");
    if (dot <= 0) return null;
    const first = name.slice(0, dot);
    if (this.serverNames.length === 0) return this.index.byId.has(first) ? first : null;
    const rest = name.slice(dot + 1).replace(/\.$/, "");
    return this.serverNames.includes(rest) ? clientIdOf(first) : null;
  }

  private resolve(ctx: DnsContext, key: string, optionMac: string | null, ecsAddress: Uint8Array | null, id: string | null): Hit {
    const address = ecsAddress ?? ctx.clientAddress;
    const addressText = ecsAddress !== null ? formatIP(ecsAddress) : ctx.clientIp;
    // The neighbour table knows the address the query is identified by: a trusted forwarder's own MAC is not its clients'.
    const mac = optionMac ?? this.neighbours.get(addressText) ?? null;
    const client = this.lookup(mac, id, addressText, address);
    const groups = new Set(client?.groups ?? []);
    if (address !== null) for (const g of this.index.groupPrefixes.all(address)) groups.add(g);
    const ordered = this.groupOrder.filter((g) => groups.has(g));
    const name = client?.name ?? null;
    const identity: ClientIdentity = {
      name,
      groups: ordered,
      memberOf: new Set(name === null ? ordered : [name, ...ordered]),
      paused: ordered.some((g) => this.paused.has(g)),
    };
    const seen = this.seenOf(name, mac, id, addressText);
    const hit: Hit = { identity, seen, address: addressText, groupCells: ordered.map((g) => this.options.groupCell(g)) };
    if (this.memo.size >= MEMO_LIMIT) this.memo = new Map();
    this.memo.set(key, hit);
    return hit;
  }

  private lookup(mac: string | null, id: string | null, addressText: string, address: Uint8Array | null = null): ClientRecord | undefined {
    const ix = this.index;
    let client = this.trustIds && id !== null ? ix.byId.get(id) : undefined;
    if (!client && mac !== null) client = ix.byMac.get(mac);
    if (!client) {
      const ip = address ?? parseAddress(addressText);
      if (ip !== null) client = ix.prefixes.longest(ip);
    }
    if (!client && id !== null) client = ix.byId.get(id);
    return client;
  }

  private seenOf(name: string | null, mac: string | null, id: string | null, address: string): SeenClient | null {
    const now = this.options.now();
    if (name !== null) {
      let s = this.seenNamed.get(name);
      if (!s) {
        s = { name, key: name, address, mac, id, hostname: null, first_seen_ms: now, last_seen_ms: now, queries: 0 };
        this.seenNamed.set(name, s);
      }
      if (mac !== null) s.mac = mac;
      if (id !== null) s.id = id;
      return s;
    }
    const key = unnamedKey(mac, id, address);
    const known = this.seenUnnamed.get(key);
    if (known) return known;
    const s: SeenClient = { name: null, key, address, mac, id, hostname: null, first_seen_ms: now, last_seen_ms: now, queries: 0 };
    // Placed with the query that found it counted (identify() counts it next).
    this.admit(s, 1);
    if (this.fresh.length < FRESH_LIMIT) this.fresh.push(s);
    return s;
  }

  /** Files a seen client as a query from it would be: under the client its identifiers name, or unnamed; merged with an entry already there. */
  private place(s: SeenClient): void {
    const client = this.lookup(s.mac, s.id, s.address);
    const into = client ? this.seenNamed.get(client.name) : this.seenUnnamed.get(unnamedKey(s.mac, s.id, s.address));
    if (into) mergeInto(into, s);
    else if (client) this.seenNamed.set(client.name, { ...s, name: client.name, key: client.name });
    else this.admit({ ...s, name: null, key: unnamedKey(s.mac, s.id, s.address) });
  }

  /**
   * Keeps an unnamed client. When max_seen are kept already, the least recently seen one goes: entries
   * are kept in the order they were placed, and one asked for since (its query count grew) is placed
   * again at the end instead of going (a "second chance": no bookkeeping on the query path).
   */
  private admit(s: SeenClient, counting = 0): void {
    while (this.seenUnnamed.size >= this.maxSeen) {
      const first = this.seenUnnamed.values().next();
      if (first.done) break;
      const head = first.value;
      this.seenUnnamed.delete(head.key);
      if (head.queries > (this.placedAt.get(head) ?? 0)) {
        this.seenUnnamed.set(head.key, head);
        this.placedAt.set(head, head.queries);
      } else this.evicted++;
    }
    this.seenUnnamed.set(s.key, s);
    this.placedAt.set(s, s.queries + counting);
  }

  private rebuild(): void {
    this.index = this.build();
    this.memo = new Map();
    this.serverNameIds = new Map();
  }

  private build(): Index {
    const ix: Index = { clients: new Map(), byMac: new Map(), byId: new Map(), prefixes: new PrefixTable(), groupPrefixes: new PrefixTable() };
    for (const c of [...this.declared, ...this.named]) {
      if (ix.clients.has(c.name)) continue;
      ix.clients.set(c.name, c);
      for (const m of c.macs) {
        const mac = macOf(m);
        if (mac !== null && !ix.byMac.has(mac)) ix.byMac.set(mac, c);
      }
      for (const i of c.ids) {
        const id = clientIdOf(i);
        if (id !== null && !ix.byId.has(id)) ix.byId.set(id, c);
      }
      for (const a of c.addresses) ix.prefixes.add(a, c);
    }
    for (const [group, addresses] of this.groupAddresses) for (const a of addresses) ix.groupPrefixes.add(a, group);
    return ix;
  }
}

/** How an unnamed client is told apart: its MAC, else its client id, else its address. */
function unnamedKey(mac: string | null, id: string | null, address: string): string {
  return mac !== null ? `mac ${mac}` : id !== null ? `id ${id}` : address;
}

function formatMac(b: Uint8Array): string {
  let out = "";
  for (let i = 0; i < 6; i++) out += (i > 0 ? ":" : "") + b[i].toString(16).padStart(2, "0");
  return out;
}

function parseAddress(text: string): Uint8Array | null {
  const pct = text.indexOf("%");
  const ip = parseIP(pct < 0 ? text : text.slice(0, pct));
  return ip === null ? null : unmapIPv4(ip);
}

/** One seen client's queries added to another's: the earliest first sighting, the latest one's details. */
function mergeInto(into: SeenClient, s: SeenClient): void {
  into.queries += s.queries;
  into.first_seen_ms = Math.min(into.first_seen_ms, s.first_seen_ms);
  if (s.last_seen_ms > into.last_seen_ms) Object.assign(into, { last_seen_ms: s.last_seen_ms, address: s.address, mac: s.mac ?? into.mac, id: s.id ?? into.id, hostname: s.hostname ?? into.hostname });
}
