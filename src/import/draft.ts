// The Sluice configuration an importer builds, one setting at a time, and turns into YAML at the end.
// Importers say what the source does (upstreams, lists, local records, clients...) in the source's
// own terms; this file decides which plugins do it here and how the `main` sequence ties them:
//   query recorder → local CNAMEs → local records → allow list → block lists → per-client upstreams →
//   conditional forwards → cache → forward.

import { isIP } from "node:net";
import { stringify } from "yaml";
import type { ImportResult } from "./types.js";

/**
 * How a list is written. `adblock`: AdGuard/EasyList rules (also reads plain names, exactly, and hosts
 * lines) → an `adguard_rule` provider. `domains`: one name per line that also covers its subdomains →
 * `domain_set`. `hosts`: `0.0.0.0 name` lines → `adguard_rule` too (it reads hosts lines and skips
 * `localhost` and its kin; a `domain_set` would take the address column for a name).
 */
export type ListSyntax = "adblock" | "domains" | "hosts";

/** What a blocked name is answered with, in the source's terms. */
export type BlockAnswer = { mode: "nxdomain" | "nodata" | "null" | "refused" } | { mode: "custom"; ips: string[] };

export interface DraftClient {
  /** The source's name for it; made into a Sluice name (letters, digits, `.`, `_`, `-`). */
  name: string;
  addresses?: string[];
  macs?: string[];
  ids?: string[];
  groups?: string[];
  /** Its own upstreams (already in forward's `addr` form); none: the global ones. */
  upstreams?: string[];
  /** false: nothing is blocked for it. */
  blocking?: boolean;
}

interface ListRef {
  syntax: ListSyntax;
  /** A URL (downloaded, refreshed by cron) or a local path (read where it is). */
  source: string;
  name: string;
}

/**
 * An upstream as forward's `addr`, or null when this build cannot speak its protocol (DoQ, DoH3,
 * DNSCrypt stamps). Accepts `ip`, `ip:port`, `[v6]:port`, `ip#port` (dnsmasq, Pi-hole), and the
 * `udp://`, `tcp://`, `tls://`, `https://` forms with a host name or an address.
 */
export function normaliseUpstream(text: string): string | null {
  const s = text.trim();
  if (s === "") return null;
  const scheme = /^([a-z0-9+]+):\/\//i.exec(s)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    if (["udp", "tcp", "tls", "https", "tcp+pipeline", "tls+pipeline"].includes(scheme)) return scheme + s.slice(scheme.length);
    return null; // quic://, h3://, sdns://, http:// ...
  }
  const hash = /^(.+)#(\d+)$/.exec(s);
  if (hash) return `udp://${hostPort(hash[1] ?? "", hash[2] ?? "53")}`;
  if (isIP(s) === 6) return `udp://[${s}]`;
  if (isIP(s) === 4) return `udp://${s}`;
  const bracketed = /^\[([0-9a-f:.]+)\](?::(\d+))?$/i.exec(s);
  if (bracketed && isIP(bracketed[1] ?? "") === 6) return `udp://[${bracketed[1]}]${bracketed[2] ? ":" + bracketed[2] : ""}`;
  const hp = /^([a-z0-9.-]+)(?::(\d+))?$/i.exec(s);
  if (hp) return `udp://${s}`;
  return null;
}

function hostPort(host: string, port: string): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** `ip` or `ip:port` for a bootstrap server (plain DNS only), or null. */
export function normaliseBootstrap(text: string): string | null {
  const addr = normaliseUpstream(text);
  if (addr === null || !addr.startsWith("udp://")) return null;
  const rest = addr.slice("udp://".length);
  const host = rest.startsWith("[") ? rest.slice(1, rest.indexOf("]")) : rest.split(":")[0] ?? "";
  return isIP(host) === 0 ? null : rest;
}

/** A name the `clients` provider accepts: letters, digits, `.`, `_`, `-`, starting with a letter or digit, ≤ 63. */
export function sluiceName(text: string): string {
  const s = text.trim().toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^[^a-z0-9]+/, "").slice(0, 63);
  return s === "" ? "client" : s;
}

type Plugin = { tag: string; type: string; args?: unknown };
type Rule = { matches?: string | string[]; exec: string };

export class Draft {
  readonly unsupported: string[] = [];
  readonly notes: string[] = [];
  readonly files: Record<string, string> = {};
  private upstreams: string[] = [];
  private bootstrap: string[] = [];
  private cache: { size?: number; min_positive_ttl?: number; max_positive_ttl?: number; lazy_cache_ttl?: number } | null = {};
  private listen: string[] = [];
  private blockLists: ListRef[] = [];
  private allowLists: ListRef[] = [];
  private blockRules: Record<ListSyntax, string[]> = { adblock: [], domains: [], hosts: [] };
  private allowRules: Record<ListSyntax, string[]> = { adblock: [], domains: [], hosts: [] };
  private hostsEntries: string[] = [];
  private redirects: string[] = [];
  private conditional: { domains: string[]; upstreams: string[] }[] = [];
  private clients: DraftClient[] = [];
  private answer: BlockAnswer = { mode: "nxdomain" };
  private blockTtl: number | undefined;
  private refresh: string | null = "0 3 * * *";
  private fallbacks: string[] = [];
  private selection: "race" | "balanced" | "parallel" = "race";
  private timeout: string | undefined;
  private api: string | null = null;
  private recorder: { retention_days?: number } | null = null;

  constructor(private readonly sourceName: string) {}

  unsupportedSetting(key: string, value: unknown, why = ""): void {
    this.unsupported.push(`${key}: ${JSON.stringify(value)}${why ? ` (${why})` : ""}`);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  /** Upstream servers in the source's spelling; those this build cannot reach are listed as unsupported under `key`. */
  addUpstreams(key: string, list: string[]): void {
    for (const u of list) {
      const addr = normaliseUpstream(u);
      if (addr === null) this.unsupportedSetting(key, u, "protocol not in this build: DoQ, DNS over HTTP/3 and DNSCrypt are not supported");
      else if (!this.upstreams.includes(addr)) this.upstreams.push(addr);
    }
  }

  hasUpstreams(): boolean {
    return this.upstreams.length > 0;
  }

  addBootstrap(key: string, list: string[]): void {
    for (const b of list) {
      const addr = normaliseBootstrap(b);
      if (addr === null) this.unsupportedSetting(key, b, "a bootstrap server must be a plain DNS address");
      else if (!this.bootstrap.includes(addr)) this.bootstrap.push(addr);
    }
  }

  setCache(c: { size?: number; minTtl?: number; maxTtl?: number; serveStale?: number }): void {
    if (this.cache === null) return;
    if (c.size !== undefined) this.cache.size = Math.max(1, Math.round(c.size));
    if (c.minTtl !== undefined && c.minTtl > 0) this.cache.min_positive_ttl = c.minTtl;
    if (c.maxTtl !== undefined && c.maxTtl > 0) this.cache.max_positive_ttl = c.maxTtl;
    if (c.serveStale !== undefined && c.serveStale > 0) this.cache.lazy_cache_ttl = c.serveStale;
    const { min_positive_ttl: min, max_positive_ttl: max } = this.cache;
    if (min !== undefined && max !== undefined && min > max) {
      this.note(`cache: the minimum TTL ${min} is above the maximum ${max}; the minimum is lowered to it`);
      this.cache.min_positive_ttl = max;
    }
  }

  disableCache(): void {
    this.cache = null;
  }

  /** `ip:port` / `[v6]:port` addresses a UDP and a TCP server listen on. */
  addListen(addr: string): void {
    if (!this.listen.includes(addr)) this.listen.push(addr);
  }

  addBlockList(source: string, syntax: ListSyntax, name: string): void {
    this.blockLists.push({ source, syntax, name });
  }

  addAllowList(source: string, syntax: ListSyntax, name: string): void {
    this.allowLists.push({ source, syntax, name });
  }

  /** Rules written by hand in the source (adblock syntax may mix blocks and `@@` exceptions). */
  addBlockRules(lines: string[], syntax: ListSyntax): void {
    this.blockRules[syntax].push(...lines);
  }

  addAllowRules(lines: string[], syntax: ListSyntax): void {
    this.allowRules[syntax].push(...lines);
  }

  /** A local record: `name` (exactly) answers with these addresses. */
  addHost(name: string, ips: string[]): void {
    this.hostsEntries.push(`${name} ${ips.join(" ")}`);
  }

  /** A local CNAME: `name` is answered as `target` is. */
  addRedirect(name: string, target: string): void {
    this.redirects.push(`${name} ${target}`);
  }

  /** Names under these domains go to these upstreams (forward's `addr` form or the source's spelling). */
  addConditional(key: string, domains: string[], upstreams: string[]): void {
    const addrs: string[] = [];
    for (const u of upstreams) {
      const a = normaliseUpstream(u);
      if (a === null) this.unsupportedSetting(key, u, "protocol not in this build");
      else addrs.push(a);
    }
    if (addrs.length > 0 && domains.length > 0) this.conditional.push({ domains, upstreams: addrs });
  }

  addClient(c: DraftClient): void {
    this.clients.push(c);
  }

  setBlockAnswer(answer: BlockAnswer, ttl?: number): void {
    this.answer = answer;
    this.blockTtl = ttl;
  }

  /** Upstreams asked only when the main ones fail or are slower than the upstream timeout. */
  addFallbacks(key: string, list: string[]): void {
    for (const u of list) {
      const addr = normaliseUpstream(u);
      if (addr === null) this.unsupportedSetting(key, u, "protocol not in this build");
      else if (!this.fallbacks.includes(addr)) this.fallbacks.push(addr);
    }
  }

  /** race: up to 3 at once, the first answer wins; balanced: one at a time, spread by load; parallel: all at once. */
  setSelection(mode: "race" | "balanced" | "parallel"): void {
    this.selection = mode;
  }

  /** Bound on one query to one upstream (a duration: `10s`). */
  setUpstreamTimeout(duration: string): void {
    this.timeout = duration;
  }

  /** A 5-field cron schedule for refreshing downloaded lists; null: never (downloaded once, when missing). */
  setRefresh(schedule: string | null): void {
    this.refresh = schedule;
  }

  setApi(listen: string): void {
    this.api = listen;
  }

  setRecorder(r: { retention_days?: number }): void {
    this.recorder = r;
  }

  /** The configuration as YAML and its files. */
  build(): ImportResult {
    const plugins: Plugin[] = [];
    const main: Rule[] = [];
    if (this.recorder) {
      plugins.push({ tag: "recorder", type: "query_recorder", args: { path: "data/queries.db", ...this.recorder } });
      main.push({ exec: "$recorder" });
    }
    const clients = this.buildClients(plugins);
    // A local CNAME first: the rest of the sequence (local records included) answers its target.
    if (this.redirects.length > 0) {
      this.files["rules/cnames.txt"] = this.redirects.join("\n") + "\n";
      plugins.push({ tag: "local_cnames", type: "redirect", args: { files: ["rules/cnames.txt"] } });
      main.push({ exec: "$local_cnames" });
    }
    if (this.hostsEntries.length > 0) {
      this.files["rules/hosts.txt"] = this.hostsEntries.join("\n") + "\n";
      plugins.push({ tag: "local_records", type: "hosts", args: { files: ["rules/hosts.txt"], short_circuit: true } });
      main.push({ exec: "$local_records" });
    }
    const allow = this.buildProviders(plugins, "allow", this.allowLists, this.allowRules);
    const block = this.buildProviders(plugins, "block", this.blockLists, this.blockRules);
    if (allow.length > 0) plugins.push({ tag: "allowed", type: "qname", args: allow.map((t) => `$${t}`) });
    if (block.length > 0) {
      plugins.push({ tag: "blocked", type: "qname", args: block.map((t) => `$${t}`) });
      const a = this.answer;
      plugins.push({
        tag: "block_answer",
        type: "black_hole",
        args: { mode: a.mode, ...(a.mode === "custom" ? { ips: a.ips } : {}), ...(this.blockTtl !== undefined ? { ttl: this.blockTtl } : {}), short_circuit: true },
      });
      const matches = [...(clients.unfiltered ? ["!client unfiltered"] : []), ...(allow.length > 0 ? ["!$allowed"] : []), "$blocked"];
      main.push({ matches, exec: "$block_answer" });
    }
    this.buildDownloads(plugins);
    for (const [i, c] of clients.ownUpstreams.entries()) {
      plugins.push({ tag: `forward_client_${i + 1}`, type: "forward", args: this.forwardArgs(c.upstreams, true) });
      main.push({ matches: `client ${c.name}`, exec: `$forward_client_${i + 1}` });
    }
    for (const [i, c] of this.conditional.entries()) {
      plugins.push({ tag: `forward_cond_${i + 1}`, type: "forward", args: this.forwardArgs(c.upstreams, true) });
      main.push({ matches: `qname ${c.domains.map((d) => `domain:${d}`).join(" ")}`, exec: `$forward_cond_${i + 1}` });
    }
    if (this.cache !== null) {
      plugins.push({ tag: "cache", type: "cache", ...(Object.keys(this.cache).length > 0 ? { args: { ...this.cache } } : {}) });
      main.push({ exec: "$cache" });
    }
    if (this.upstreams.length === 0) {
      this.note("the source names no upstream this build can use: forwarding to 9.9.9.9 (Quad9); change it in `upstream`");
      this.upstreams.push("udp://9.9.9.9");
    }
    plugins.push({ tag: "upstream", type: "forward", args: this.forwardArgs(this.upstreams, false) });
    if (this.fallbacks.length > 0) {
      plugins.push({ tag: "upstream_fallback", type: "forward", args: this.forwardArgs(this.fallbacks, false) });
      plugins.push({ tag: "resolve", type: "fallback", args: { primary: "upstream", secondary: "upstream_fallback", threshold: durationMs(this.timeout ?? "5s") } });
      main.push({ exec: "$resolve" });
    } else main.push({ exec: "$upstream" });
    plugins.push({ tag: "main", type: "sequence", args: main });
    if (this.listen.length === 0) {
      this.note("the source names no listen address: listening on 127.0.0.1:53");
      this.listen.push("127.0.0.1:53");
    }
    for (const [i, addr] of this.listen.entries()) {
      const n = i === 0 ? "" : `_${i + 1}`;
      plugins.push({ tag: `udp${n}`, type: "udp_server", args: { entry: "main", listen: addr } });
      plugins.push({ tag: `tcp${n}`, type: "tcp_server", args: { entry: "main", listen: addr } });
    }
    plugins.push(...this.extraServers);
    const doc: Record<string, unknown> = {};
    if (this.api !== null) doc.api = { http: this.api };
    doc.plugins = plugins;
    return { yaml: stringify(doc, { lineWidth: 0 }), files: this.files, unsupported: this.unsupported, notes: this.notes };
  }

  /** Extra plugins the importer adds (DoT/DoH servers): placed before the `main` sequence's servers. */
  private readonly extraServers: Plugin[] = [];

  private forwardArgs(upstreams: string[], shortCircuit: boolean): Record<string, unknown> {
    const ups = upstreams.map((addr) => ({
      addr,
      ...(this.bootstrap.length > 0 && needsBootstrap(addr) ? { bootstrap: this.bootstrap.slice(0, 8) } : {}),
      ...(this.timeout !== undefined ? { timeout: this.timeout } : {}),
    }));
    const n = ups.length;
    const spread =
      n < 2 ? {} : this.selection === "balanced" ? { response_selection: "balanced" } : { concurrent: this.selection === "parallel" ? Math.min(32, n) : Math.min(3, n) };
    return { upstreams: ups, ...spread, ...(shortCircuit ? { short_circuit: true } : {}) };
  }

  private buildClients(plugins: Plugin[]): { unfiltered: boolean; ownUpstreams: { name: string; upstreams: string[] }[] } {
    if (this.clients.length === 0) return { unfiltered: false, ownUpstreams: [] };
    const used = new Set<string>(["unfiltered"]);
    const groups = new Set<string>();
    const list: Record<string, unknown>[] = [];
    const ownUpstreams: { name: string; upstreams: string[] }[] = [];
    let unfiltered = false;
    const claimed = new Set<string>();
    for (const c of this.clients) for (const g of c.groups ?? []) groups.add(sluiceName(g));
    for (const g of groups) used.add(g);
    for (const c of this.clients) {
      let name = sluiceName(c.name);
      for (let i = 2; used.has(name); i++) name = `${sluiceName(c.name)}-${i}`;
      if (name !== c.name) this.note(`client '${c.name}' is named '${name}' here`);
      used.add(name);
      // An identifier belongs to one client: a second claim is dropped, with a note.
      const own = (xs: string[] | undefined): string[] =>
        (xs ?? []).filter((x) => {
          const key = x.toLowerCase();
          if (claimed.has(key)) {
            this.note(`client '${c.name}': '${x}' is another client's already; left out`);
            return false;
          }
          claimed.add(key);
          return true;
        });
      const cGroups = (c.groups ?? []).map(sluiceName);
      if (c.blocking === false) {
        cGroups.push("unfiltered");
        unfiltered = true;
      }
      list.push({ name, addresses: own(c.addresses), macs: own(c.macs), ids: own(c.ids), groups: [...new Set(cGroups)] });
      if (c.upstreams && c.upstreams.length > 0) ownUpstreams.push({ name, upstreams: c.upstreams });
    }
    if (unfiltered) groups.add("unfiltered");
    plugins.push({ tag: "clients", type: "clients", args: { clients: list, groups: [...groups].map((g) => ({ name: g })), ...(this.blockLists.length + this.blockRuleCount() > 0 ? { pause: ["blocked"] } : {}) } });
    return { unfiltered, ownUpstreams };
  }

  private blockRuleCount(): number {
    return this.blockRules.adblock.length + this.blockRules.domains.length + this.blockRules.hosts.length;
  }

  /** Providers for one side (allow or block): an adguard_rule for adblock/hosts lists and rules, a domain_set for domain lists. */
  private buildProviders(plugins: Plugin[], side: "allow" | "block", lists: ListRef[], rules: Record<ListSyntax, string[]>): string[] {
    const adblockFiles: string[] = [];
    const domainFiles: string[] = [];
    for (const [i, l] of lists.entries()) {
      const file = isUrl(l.source) ? `lists/${side}-${i + 1}.txt` : l.source;
      (l.syntax === "domains" ? domainFiles : adblockFiles).push(file);
      if (isUrl(l.source)) this.downloads.push({ url: l.source, file, provider: l.syntax === "domains" ? `${side}_domains` : `${side}_adblock` });
    }
    const adblockRules = [...rules.adblock, ...rules.hosts];
    if (adblockRules.length > 0) {
      this.files[`rules/${side}-adblock.txt`] = adblockRules.join("\n") + "\n";
      adblockFiles.push(`rules/${side}-adblock.txt`);
    }
    if (rules.domains.length > 0) {
      this.files[`rules/${side}-domains.txt`] = rules.domains.join("\n") + "\n";
      domainFiles.push(`rules/${side}-domains.txt`);
    }
    const tags: string[] = [];
    if (adblockFiles.length > 0) {
      plugins.push({ tag: `${side}_adblock`, type: "adguard_rule", args: { files: adblockFiles } });
      tags.push(`${side}_adblock`);
    }
    if (domainFiles.length > 0) {
      plugins.push({ tag: `${side}_domains`, type: "domain_set", args: { files: domainFiles } });
      tags.push(`${side}_domains`);
    }
    return tags;
  }

  private downloads: { url: string; file: string; provider: string }[] = [];

  /** One `download` for every listed URL and one `cron` job that fetches them and reloads their providers. */
  private buildDownloads(plugins: Plugin[]): void {
    if (this.downloads.length === 0) return;
    if (this.refresh === null) this.note("the lists are downloaded when missing and never refreshed (the source did not refresh them)");
    const items = this.downloads.map((d) => {
      const slash = d.file.lastIndexOf("/");
      return { url: d.url, dir: d.file.slice(0, slash), filename: d.file.slice(slash + 1) };
    });
    plugins.push({ tag: "fetch_lists", type: "download", args: { timeout: "60s", downloads: items } });
    const reloads = [...new Set(this.downloads.map((d) => d.provider))].map((p) => `reload_provider $${p}`);
    if (this.refresh !== null) plugins.push({ tag: "refresh_lists", type: "cron", args: { jobs: [{ name: "lists", schedule: this.refresh, executors: ["$fetch_lists", ...reloads] }] } });
  }

  /** A server the importer maps itself (DoT, DoH): added after the UDP/TCP servers. */
  addServer(p: Plugin): void {
    this.extraServers.push(p);
  }

  /** The source this draft is of, for messages. */
  get source(): string {
    return this.sourceName;
  }
}

/** `10s`, `1m30s`, `500ms`, `2h` (Go-style durations, as AdGuard Home writes them) in ms; 5000 when unreadable. */
export function durationMs(text: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const parts = text.trim().match(/(\d+(?:\.\d+)?)(ms|s|m|h)/g);
  if (!parts || parts.join("") !== text.trim()) return 5000;
  for (const p of parts) {
    const m = /(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(p);
    if (m) total += Number(m[1]) * (units[m[2] ?? "s"] ?? 1000);
  }
  return Math.max(1, Math.min(600_000, Math.round(total)));
}

function isUrl(s: string): boolean {
  return /^https?:\/\//i.test(s);
}

function needsBootstrap(addr: string): boolean {
  const rest = addr.replace(/^[a-z0-9+]+:\/\//i, "");
  const host = rest.startsWith("[") ? rest.slice(1, rest.indexOf("]")) : (rest.split(/[:/]/)[0] ?? "");
  return isIP(host) === 0;
}
