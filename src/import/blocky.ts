// `sluice import blocky config.yml`: blocky's configuration as a Sluice pipeline, in blocky's order:
// query log → fqdnOnly → filtering → ECS → customDNS → blocking → cache → conditional →
// special-use names → per-client upstream groups → the default group.

import { readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, join } from "node:path";
import { parse } from "yaml";
import { ClientBook, importBlocking } from "./blocky-lists.js";
import { goDurationSeconds, listenList, parseUpstream, slug } from "./blocky-values.js";
import { duration, isObj, Output, strings, type Obj } from "./output.js";
import { ImportError, type Importer, type ImportResult } from "./types.js";

const TOP_KEYS = [
  "upstreams", "upstream", "upstreamTimeout", "bootstrapDns", "blocking", "caching", "conditional", "customDNS", "clientLookup",
  "ports", "port", "certFile", "keyFile", "queryLog", "prometheus", "filtering", "fqdnOnly", "ede", "ecs", "specialUseDomains",
  "redis", "log", "logLevel",
];

/** RFC 6762 appendix G: TLDs used privately, which blocky answers NXDOMAIN itself unless told not to. */
const APPENDIX_G = ["intranet", "internal", "private", "corp", "home", "lan"];

function readConfig(path: string): { doc: Obj; file: string } {
  let file = path;
  try {
    if (statSync(path).isDirectory()) file = ["config.yml", "config.yaml"].map((n) => join(path, n)).find((p) => statSync(p, { throwIfNoEntry: false })?.isFile()) ?? join(path, "config.yml");
  } catch (err) {
    throw new ImportError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ImportError(`cannot read ${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new ImportError(`${file} is not YAML: ${(err as Error).message}`);
  }
  if (!isObj(doc) || (doc.upstreams === undefined && doc.upstream === undefined)) throw new ImportError(`${file} is not a blocky configuration (no upstreams)`);
  return { doc, file };
}

interface UpstreamSettings {
  concurrent: number;
  timeout?: string;
  bootstrap: string[];
}

function forwardArgs(out: Output, key: string, list: unknown, s: UpstreamSettings, shortCircuit: boolean): Obj | null {
  const ups: Obj[] = [];
  for (const raw of strings(list)) {
    const u = parseUpstream(raw);
    if (typeof u === "string") {
      out.unsupportedKey(key, raw, u);
      continue;
    }
    const host = u.addr.replace(/^[a-z]+:\/\//, "").replace(/^\[([^\]]+)\].*$/, "$1").split(/[:/]/)[0];
    const bootstrap = u.dial_addr === undefined && isIP(host) === 0 && s.bootstrap.length > 0 ? { bootstrap: s.bootstrap } : {};
    ups.push({ ...u, ...bootstrap, ...(s.timeout !== undefined ? { timeout: s.timeout } : {}) });
  }
  if (ups.length === 0) return null;
  return { upstreams: ups, ...(ups.length > 1 && s.concurrent > 1 ? { concurrent: Math.min(s.concurrent, ups.length) } : {}), ...(shortCircuit ? { short_circuit: true } : {}) };
}

function bootstrapList(out: Output, value: unknown): string[] {
  const list = Array.isArray(value) ? (value as unknown[]) : value === undefined ? [] : [value];
  const plain: string[] = [];
  for (const item of list) {
    const text = typeof item === "string" ? item : isObj(item) && typeof item.upstream === "string" && item.ips === undefined ? item.upstream : null;
    const u = text === null ? null : parseUpstream(text);
    const m = u !== null && typeof u !== "string" ? /^(?:udp|tcp):\/\/(.+)$/.exec(u.addr) : null;
    const host = m ? m[1].replace(/^\[([^\]]+)\].*$/, "$1").replace(/:\d+$/, "") : "";
    if (m && (isIP(host) !== 0 || isIP(m[1]) !== 0)) plain.push(m[1]);
    else out.unsupportedKey("bootstrapDns", item, "a bootstrap server here is plain DNS at an address (DoT/DoH bootstraps are not)");
  }
  return plain.slice(0, 8);
}

function importUpstreams(out: Output, doc: Obj, book: ClientBook): void {
  const legacy = doc.upstreams === undefined;
  const u = legacy ? { groups: doc.upstream } : out.section("upstreams", doc.upstreams, ["groups", "strategy", "timeout", "init", "startVerify", "userAgent"]);
  for (const k of ["init", "startVerify", "userAgent"] as const) if (u[k] !== undefined) out.unsupportedKey(`upstreams.${k}`, u[k]);
  const strategy = typeof u.strategy === "string" ? u.strategy : "parallel_best";
  if (strategy === "strict") out.note("upstreams.strategy strict: upstreams are asked one at a time from a random start, not in their written order");
  else if (!["parallel_best", "random"].includes(strategy)) out.unsupportedKey("upstreams.strategy", strategy);
  const timeout = goDurationSeconds(u.timeout ?? doc.upstreamTimeout ?? "2s");
  const settings: UpstreamSettings = {
    concurrent: strategy === "parallel_best" ? 2 : 1,
    timeout: timeout !== null && timeout > 0 ? duration(timeout) : undefined,
    bootstrap: bootstrapList(out, doc.bootstrapDns),
  };
  const groups = isObj(u.groups) ? u.groups : {};
  const key = legacy ? "upstream" : "upstreams.groups";
  for (const [name, list] of Object.entries(groups)) {
    if (name === "default") continue;
    const who = book.matcher(`${key}.${name}`, name, list);
    const args = who === null ? null : forwardArgs(out, `${key}.${name}`, list, settings, true);
    if (who === null || args === null) continue;
    out.add({ tag: `upstream_${slug(name)}`, type: "forward", args });
    out.main.push({ matches: who, exec: `$upstream_${slug(name)}` });
  }
  const args = forwardArgs(out, `${key}.default`, groups.default, settings, false);
  if (args === null) throw new ImportError(`${key}.default names no upstream this build can use`);
  out.add({ tag: "upstream", type: "forward", args });
  out.main.push({ exec: "$upstream" });
}

function importCustomDns(out: Output, value: unknown): void {
  const c = out.section("customDNS", value, ["customTTL", "rewrite", "mapping", "filterUnmappedTypes"]);
  const mapping = isObj(c.mapping) ? c.mapping : {};
  const names = Object.keys(mapping);
  if (isObj(c.rewrite)) {
    const rules = Object.entries(c.rewrite).map(([from, to]) => `full:${from} ${String(to)}`);
    if (rules.length > 0) {
      out.add({ tag: "custom_rewrite", type: "redirect", args: { rules } });
      out.main.push({ exec: "$custom_rewrite" });
      out.note("customDNS.rewrite: each name is answered as its target (with a CNAME); its subdomains are not rewritten");
    }
  }
  if (names.length === 0) return;
  const entries = names.map((n) => `domain:${n} ${strings(mapping[n]).join(",").split(",").map((s) => s.trim()).filter((s) => s !== "").join(" ")}`);
  out.add({ tag: "custom_dns", type: "hosts", args: { entries } });
  out.main.push({ exec: "$custom_dns" });
  const ttl = goDurationSeconds(c.customTTL ?? "1h", 60);
  out.main.push({ matches: "has_resp", exec: `ttl ${Math.max(0, Math.round(ttl ?? 3600))}` }, { matches: "has_resp", exec: "accept" });
  if (c.filterUnmappedTypes === false) out.note("customDNS.filterUnmappedTypes false: other types of a mapped name go upstream; an A/AAAA the mapping lacks is still answered NODATA");
  else out.main.push({ matches: `qname ${names.map((n) => `domain:${n}`).join(" ")}`, exec: "reject nodata" });
}

function importConditional(out: Output, value: unknown): void {
  const c = out.section("conditional", value, ["rewrite", "mapping", "fallbackUpstream"]);
  if (c.fallbackUpstream === true) out.unsupportedKey("conditional.fallbackUpstream", true, "an empty answer of the conditional resolver is served as it is");
  if (isObj(c.rewrite)) {
    const rules = Object.entries(c.rewrite).map(([from, to]) => `domain:${from} ${String(to)}`);
    if (rules.length > 0) {
      out.add({ tag: "conditional_rewrite", type: "redirect", args: { rules } });
      out.main.push({ exec: "$conditional_rewrite" });
      out.note("conditional.rewrite: a rewritten name is asked as the target name itself (subdomains included), not with its own prefix kept");
    }
  }
  const settings: UpstreamSettings = { concurrent: 2, bootstrap: [] };
  for (const [domain, list] of Object.entries(isObj(c.mapping) ? c.mapping : {})) {
    const args = forwardArgs(out, `conditional.mapping.${domain}`, strings(list).join(",").split(","), settings, true);
    if (args === null) continue;
    const tag = `conditional_${slug(domain === "." ? "unqualified" : domain)}`;
    out.add({ tag, type: "forward", args });
    out.main.push({ matches: domain === "." ? "qname regexp:^[^.]+$" : `qname domain:${domain}`, exec: `$${tag}` });
  }
}

function importCaching(out: Output, value: unknown): void {
  const c = out.section("caching", value, ["minTime", "maxTime", "maxItemsCount", "prefetching", "prefetchExpires", "prefetchThreshold", "prefetchMaxItemsCount", "cacheTimeNegative"]);
  const max = goDurationSeconds(c.maxTime ?? 0) ?? 0;
  if (max < 0) {
    out.note("caching.maxTime < 0: blocky caches nothing, so no cache is configured");
    return;
  }
  const min = goDurationSeconds(c.minTime ?? 0) ?? 0;
  const size = typeof c.maxItemsCount === "number" && c.maxItemsCount > 0 ? c.maxItemsCount : 100000;
  if (size === 100000) out.note("caching.maxItemsCount unlimited: the cache holds at most 100000 answers (about 40 MB)");
  const args: Obj = { size, short_circuit: true };
  if (max > 0) args.max_positive_ttl = Math.max(1, Math.round(max));
  if (min > 0) args.min_positive_ttl = max > 0 ? Math.min(Math.round(min), Math.round(max)) : Math.round(min);
  const neg = goDurationSeconds(c.cacheTimeNegative ?? "30m");
  if (neg !== null && neg < 0) args.cache_negative = false;
  else if (neg !== null && neg > 0) args.max_negative_ttl = Math.max(1, Math.round(neg));
  if (c.prefetching === true) {
    args.prefetch = true;
    if (typeof c.prefetchThreshold === "number" && c.prefetchThreshold >= 1) args.prefetch_min_hits = Math.min(1000000, c.prefetchThreshold);
  }
  for (const k of ["prefetchExpires", "prefetchMaxItemsCount"] as const) if (c[k] !== undefined) out.unsupportedKey(`caching.${k}`, c[k], "prefetch counts hits per entry during its TTL");
  out.add({ tag: "cache", type: "cache", args });
  out.main.push({ exec: "$cache" });
}

function importPorts(out: Output, doc: Obj): void {
  const p = doc.ports === undefined ? { dns: doc.port } : out.section("ports", doc.ports, ["dns", "tls", "https", "http"]);
  let dns = listenList(p.dns ?? 53);
  if (p.dns === undefined) out.note("ports.dns not set: listening on :53 (every address), blocky's default");
  if (dns.length === 0) dns = [":53"];
  dns.forEach((listen, i) => {
    const n = i === 0 ? "" : `_${i + 1}`;
    out.add({ tag: `udp${n}`, type: "udp_server", args: { entry: "main", listen } });
    out.add({ tag: `tcp${n}`, type: "tcp_server", args: { entry: "main", listen } });
  });
  const tls = typeof doc.certFile === "string" && typeof doc.keyFile === "string" ? { cert: doc.certFile, key: doc.keyFile } : null;
  let usedCert = false;
  for (const [kind, type] of [["tls", "tcp_server"], ["https", "http_server"]] as const) {
    if (p[kind] === undefined) continue;
    if (tls === null) {
      out.unsupportedKey(`ports.${kind}`, p[kind], "needs certFile and keyFile (blocky's generated self-signed certificate is not made here)");
      continue;
    }
    usedCert = true;
    listenList(p[kind]).forEach((listen, i) => {
      const base = { listen, ...tls };
      out.add({ tag: `${kind === "tls" ? "dot" : "doh"}${i === 0 ? "" : `_${i + 1}`}`, type, args: kind === "tls" ? { entry: "main", ...base } : { entries: [{ path: "/dns-query", exec: "main" }], ...base } });
    });
  }
  if (usedCert) out.note("certFile and keyFile are used as they are written: a relative path is read from the working directory (-d)");
  else for (const k of ["certFile", "keyFile"] as const) if (doc[k] !== undefined) out.unsupportedKey(k, doc[k], "no DoT or DoH port uses it");
  const http = listenList(p.http);
  if (http.length > 0) {
    let listen = http[0];
    if (listen.startsWith(":")) {
      listen = `127.0.0.1${listen}`;
      out.note(`ports.http ${String(p.http)}: the management API listens on ${listen} only, until api.http.auth is set`);
    }
    out.top.api = { http: listen };
    out.note("ports.http is the management API here (/api/metrics, /api/...); DoH is served on ports.https");
    for (const extra of http.slice(1)) out.unsupportedKey("ports.http", extra, "the management API has one address");
  }
}

function importMisc(out: Output, doc: Obj): void {
  const log = out.section("log", doc.log, ["level", "format", "timestamp", "privacy"]);
  const level = log.level ?? doc.logLevel;
  if (typeof level === "string" && ["debug", "info", "warn", "error"].includes(level)) out.top.log = { level };
  else if (level !== undefined) out.unsupportedKey("log.level", level);
  for (const k of ["format", "timestamp", "privacy"] as const) if (log[k] !== undefined) out.unsupportedKey(`log.${k}`, log[k], "the log is JSON lines");
  const prom = out.section("prometheus", doc.prometheus, ["enable", "path"]);
  if (prom.enable === true) out.note("prometheus: metrics are always at GET /api/metrics of the management API (prometheus.path is not used)");
  const ede = out.section("ede", doc.ede, ["enable"]);
  if (ede.enable === true) out.unsupportedKey("ede.enable", true, "no Extended DNS Errors are added to answers");
  if (doc.redis !== undefined) out.unsupportedKey("redis.address", isObj(doc.redis) ? doc.redis.address : doc.redis, "several instances share cached answers through cache.redis and configuration through cluster (docs/operations.md, 'Running several instances')");
  const sudn = out.section("specialUseDomains", doc.specialUseDomains, ["rfc6762-appendixG", "enable"]);
  if (sudn.enable === false) out.unsupportedKey("specialUseDomains.enable", false);
  if (sudn["rfc6762-appendixG"] !== false) {
    out.main.push({ matches: `qname ${APPENDIX_G.map((t) => `domain:${t}`).join(" ")}`, exec: "reject nxdomain" });
  }
}

function importQueryLog(out: Output, value: unknown): void {
  if (value === undefined) return;
  const q = out.section("queryLog", value, ["type", "target", "logRetentionDays", "creationAttempts", "creationCooldown", "fields", "flushInterval"]);
  const type = typeof q.type === "string" ? q.type : "";
  if (type === "none") return;
  for (const k of ["creationAttempts", "creationCooldown", "fields", "flushInterval"] as const) if (q[k] !== undefined) out.unsupportedKey(`queryLog.${k}`, q[k]);
  const args: Obj = type === "postgresql" && typeof q.target === "string" ? { postgres: { url: q.target } } : { path: "data/queries.db" };
  if (!("postgres" in args)) out.note(`queryLog type '${type || "console"}': queries are recorded in SQLite at data/queries.db (the dashboard's query log)`);
  if (typeof q.logRetentionDays === "number" && q.logRetentionDays > 0) args.retention_days = q.logRetentionDays;
  out.add({ tag: "recorder", type: "query_recorder", args });
  out.main.push({ exec: "$recorder" });
}

function importFilters(out: Output, doc: Obj): void {
  const fqdn = out.section("fqdnOnly", doc.fqdnOnly, ["enable"]);
  if (fqdn.enable === true) out.main.push({ matches: "qname regexp:^[^.]+$", exec: "reject nxdomain" });
  const f = out.section("filtering", doc.filtering, ["queryTypes"]);
  const types = strings(f.queryTypes);
  if (types.length > 0) out.main.push({ matches: `qtype ${types.join(" ")}`, exec: "reject nodata" });
  const e = out.section("ecs", doc.ecs, ["useAsClient", "forward", "ipv4Mask", "ipv6Mask"]);
  if (e.useAsClient === true) out.unsupportedKey("ecs.useAsClient", true, "name the forwarder under clients.trusted_forwarders to identify clients by ECS");
  const mask4 = typeof e.ipv4Mask === "number" ? e.ipv4Mask : 0;
  const mask6 = typeof e.ipv6Mask === "number" ? e.ipv6Mask : 0;
  if (e.forward === true || mask4 > 0 || mask6 > 0) {
    const args: Obj = { forward: e.forward === true, send: mask4 > 0 || mask6 > 0 };
    if (mask4 > 0) args.mask4 = Math.min(32, mask4);
    if (mask6 > 0) args.mask6 = Math.min(128, mask6);
    out.add({ tag: "ecs", type: "ecs_handler", args });
    out.main.push({ exec: "$ecs" });
  }
}

function importBlocky(path: string): ImportResult {
  const { doc, file } = readConfig(path);
  const out = new Output();
  for (const [k, v] of Object.entries(doc)) if (!TOP_KEYS.includes(k)) out.unsupportedKey(k, v);
  const book = new ClientBook(out);
  book.lookup(doc.clientLookup);
  importMisc(out, doc);
  const special = out.main.splice(0); // the special-use rule goes after conditional forwarding
  importQueryLog(out, doc.queryLog);
  importFilters(out, doc);
  importCustomDns(out, doc.customDNS);
  importBlocking(out, book, doc.blocking, dirname(file));
  importCaching(out, doc.caching);
  importConditional(out, doc.conditional);
  out.main.push(...special);
  importUpstreams(out, doc, book);
  book.emit();
  importPorts(out, doc);
  return out.result();
}

/** A bad source rejects the promise with an ImportError (never a synchronous throw). */
export const importConfig: Importer = (path) => Promise.resolve(path).then(importBlocky);
