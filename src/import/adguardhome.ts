// `sluice import adguardhome`: AdGuardHome.yaml (schema_version 20 and later; the older layout, with the
// filtering settings under `dns`, is read too) → a Sluice configuration. The mapping is in
// docs/operations.md, "Moving from another tool".

import { existsSync, readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, join, resolve } from "node:path";
import { parse } from "yaml";
import { Draft, type BlockAnswer } from "./draft.js";
import { importClients, importTls } from "./adguardhome-extra.js";
import { ImportError, type Importer } from "./types.js";
import { active, bool, isObj, list, num, obj, reportRest, str, strings, type Obj } from "./values.js";

/** The filtering settings that moved from `dns` to `filtering` in schema version 20. */
const FILTERING_KEYS = [
  "protection_enabled",
  "filtering_enabled",
  "blocking_mode",
  "blocking_ipv4",
  "blocking_ipv6",
  "blocked_response_ttl",
  "rewrites",
  "filters_update_interval",
  "parental_enabled",
  "safebrowsing_enabled",
  "safe_search",
  "safesearch_enabled",
  "blocked_services",
  // (the first 13 are read; the rest are the services' own settings, FILTERING_IGNORED, and:)
  "protection_disabled_until",
  "parental_block_host",
  "safebrowsing_block_host",
  "safebrowsing_cache_size",
  "safesearch_cache_size",
  "parental_cache_size",
  "cache_time",
  "safe_fs_patterns",
  "max_http_size",
];

export const importConfig: Importer = async (path) => {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, "AdGuardHome.yaml") : path;
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ImportError(`${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isObj(doc) || (!("schema_version" in doc) && !isObj(doc.dns))) throw new ImportError(`${file}: not an AdGuardHome.yaml (no schema_version and no dns section)`);
  const d = new Draft("AdGuard Home");
  const dns = obj(doc.dns);
  const filtering = isObj(doc.filtering) ? doc.filtering : Object.fromEntries(Object.entries(dns).filter(([k]) => FILTERING_KEYS.includes(k)));
  const fPrefix = isObj(doc.filtering) ? "filtering." : "dns.";

  const hosts = strings(dns.bind_hosts);
  const port = num(dns.port) ?? 53;
  const bindHosts = hosts.length > 0 ? hosts : ["0.0.0.0"];
  if (bool(dns.serve_plain_dns) !== false) for (const h of bindHosts) d.addListen(hostPort(h, port));
  else d.note("dns.serve_plain_dns is false: no plain DNS listener (only the DoT/DoH ones below)");

  importUpstreams(d, dns, dirname(file));
  importCache(d, dns);
  const protection = bool(filtering.protection_enabled) !== false && bool(filtering.filtering_enabled) !== false;
  if (protection) importFiltering(d, doc, filtering, fPrefix);
  else d.note(`${fPrefix}protection_enabled/filtering_enabled is off: the filter lists are not imported`);
  importRewrites(d, filtering, fPrefix);
  for (const key of ["safe_search", "parental_enabled", "safebrowsing_enabled", "safesearch_enabled"]) {
    const v = filtering[key];
    if (key === "safe_search" ? bool(obj(v).enabled) === true : v === true) d.unsupportedSetting(`${fPrefix}${key}`, key === "safe_search" ? obj(v).enabled : v, "no safe search, parental control or safe browsing service here");
  }
  const services = obj(filtering.blocked_services);
  if (active(services.ids)) d.unsupportedSetting(`${fPrefix}blocked_services.ids`, services.ids, "no blocked-services catalogue: block their domains with a list");
  reportRest(d, fPrefix, filtering, FILTERING_HANDLED, FILTERING_IGNORED);
  reportRest(d, "dns.", dns, [...DNS_HANDLED, ...(isObj(doc.filtering) ? [] : FILTERING_KEYS)], ["max_goroutines"]);

  importClients(d, obj(doc.clients));
  importTls(d, obj(doc.tls), bindHosts);
  importHttpAndLogs(d, doc);
  if (bool(obj(doc.dhcp).enabled) === true) d.unsupportedSetting("dhcp.enabled", true, "Sluice is not a DHCP server");
  reportRest(d, "", doc, TOP_HANDLED);
  return Promise.resolve(d.build());
};

const FILTERING_HANDLED = FILTERING_KEYS.slice(0, 13);
/** Settings of the services that are not imported (their `*_enabled` is reported) and the list download limit. */
const FILTERING_IGNORED = ["parental_block_host", "safebrowsing_block_host", "safebrowsing_cache_size", "safesearch_cache_size", "parental_cache_size", "cache_time", "safe_fs_patterns", "max_http_size"];

const DNS_HANDLED = [
  "bind_hosts",
  "port",
  "serve_plain_dns",
  "upstream_dns",
  "upstream_dns_file",
  "bootstrap_dns",
  "fallback_dns",
  "upstream_mode",
  "upstream_timeout",
  "cache_enabled",
  "cache_size",
  "cache_ttl_min",
  "cache_ttl_max",
  "cache_optimistic",
  "cache_optimistic_max_age",
  "cache_optimistic_answer_ttl",
];

const TOP_HANDLED = [
  "schema_version",
  "dns",
  "filtering",
  "filters",
  "whitelist_filters",
  "user_rules",
  "clients",
  "tls",
  "http",
  "bind_host",
  "bind_port",
  "querylog",
  "statistics",
  "dhcp",
  // The web UI's own settings and the process's: nothing of the DNS service.
  "users",
  "auth_attempts",
  "block_auth_min",
  "language",
  "theme",
  "log",
  "os",
  "debug_pprof",
  "web_session_ttl",
  "verbose",
];

function hostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

function importUpstreams(d: Draft, dns: Obj, base: string): void {
  let lines = strings(dns.upstream_dns);
  let key = "dns.upstream_dns";
  const upstreamFile = str(dns.upstream_dns_file);
  if (upstreamFile !== undefined && upstreamFile !== "") {
    const p = resolve(base, upstreamFile);
    if (!existsSync(p)) throw new ImportError(`dns.upstream_dns_file: ${p} does not exist`);
    lines = readFileSync(p, "utf8").split("\n");
    key = "dns.upstream_dns_file";
  }
  for (const raw of lines) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const cond = /^\[\/(.*)\/\](.*)$/.exec(line);
    if (cond) {
      const domains = (cond[1] ?? "").split("/").filter((x) => x !== "");
      const ups = (cond[2] ?? "").trim().split(/\s+/).filter((x) => x !== "");
      if (domains.length === 0 || ups.includes("#") || ups.length === 0) d.unsupportedSetting(key, line, "'#' (the default upstreams) and unqualified names ([//]) have no equivalent");
      else d.addConditional(key, domains, ups);
    } else d.addUpstreams(key, line.split(/\s+/));
  }
  d.addBootstrap("dns.bootstrap_dns", strings(dns.bootstrap_dns));
  d.addFallbacks("dns.fallback_dns", strings(dns.fallback_dns));
  const mode = str(dns.upstream_mode) ?? "load_balance";
  if (mode === "parallel") d.setSelection("parallel");
  else if (mode === "fastest_addr") d.unsupportedSetting("dns.upstream_mode", mode, "answers are not probed for the fastest address; the first upstream answer wins");
  else d.setSelection("balanced");
  const timeout = str(dns.upstream_timeout);
  if (timeout !== undefined && /^(\d+(\.\d+)?(ms|s|m|h))+$/.test(timeout)) d.setUpstreamTimeout(timeout.replace(/^(\d+)m0s$/, "$1m"));
}

function importCache(d: Draft, dns: Obj): void {
  if (bool(dns.cache_enabled) === false || num(dns.cache_size) === 0) {
    d.disableCache();
    return;
  }
  const bytes = num(dns.cache_size);
  // AdGuard Home counts bytes; a Sluice entry costs about 360 bytes of heap plus its answer (~150).
  const size = bytes === undefined ? undefined : Math.max(64, Math.round(bytes / 512));
  if (size !== undefined) d.note(`dns.cache_size ${bytes} bytes is about ${size} entries here (cache size counts entries)`);
  const optimistic = bool(dns.cache_optimistic) === true;
  const maxAge = str(dns.cache_optimistic_max_age);
  const stale = optimistic ? Math.round((maxAge !== undefined ? goHours(maxAge) : 12) * 3600) : undefined;
  if (optimistic) d.note(`dns.cache_optimistic: expired answers are served for ${stale}s while refreshed (lazy_cache_ttl), with TTL 30 or less`);
  d.setCache({ size, minTtl: num(dns.cache_ttl_min), maxTtl: num(dns.cache_ttl_max), serveStale: stale });
}

/** `2160h`, `24h0m0s`, `30m` in hours. */
function goHours(text: string): number {
  const h = /(\d+)h/.exec(text)?.[1];
  const m = /(\d+)m(?!s)/.exec(text)?.[1];
  return Number(h ?? 0) + Number(m ?? 0) / 60;
}

function importFiltering(d: Draft, doc: Obj, f: Obj, prefix: string): void {
  const mode = str(f.blocking_mode) ?? "default";
  const ttl = num(f.blocked_response_ttl);
  const answers: Record<string, BlockAnswer> = { default: { mode: "null" }, null_ip: { mode: "null" }, nxdomain: { mode: "nxdomain" }, refused: { mode: "refused" } };
  if (mode === "custom_ip") {
    const ips = [str(f.blocking_ipv4), str(f.blocking_ipv6)].filter((x): x is string => x !== undefined && isIP(x) !== 0);
    d.setBlockAnswer(ips.length > 0 ? { mode: "custom", ips } : { mode: "null" }, ttl);
  } else if (answers[mode]) d.setBlockAnswer(answers[mode], ttl);
  else d.unsupportedSetting(`${prefix}blocking_mode`, mode, "answered with 0.0.0.0 / ::");
  if (mode === "default") d.note(`${prefix}blocking_mode default: blocked names get 0.0.0.0 / ::, also for hosts-style list lines (AdGuard Home answered those with the line's address)`);
  const hours = num(f.filters_update_interval) ?? 24;
  d.setRefresh(hours === 0 ? null : schedule(hours));
  for (const [key, side] of [["filters", "block"], ["whitelist_filters", "allow"]] as const) {
    for (const [i, filter] of list(doc[key]).entries()) {
      const url = str(filter.url) ?? "";
      const name = str(filter.name) ?? `${key}[${i}]`;
      if (bool(filter.enabled) !== true) {
        d.note(`${key}: '${name}' (${url}) is disabled in AdGuard Home: not imported`);
        continue;
      }
      if (url === "") continue;
      if (side === "block") d.addBlockList(url, "adblock", name);
      else d.addAllowList(url, "adblock", name);
    }
  }
  if (list(doc.whitelist_filters).some((x) => bool(x.enabled) === true)) d.note("whitelist_filters: a name the list would block (`||x^`, `x`) is allowed; its `@@` lines allow nothing");
  importUserRules(d, strings(doc.user_rules));
}

/** Hours between list refreshes as a cron schedule. */
function schedule(hours: number): string {
  if (hours < 24) return `0 */${Math.max(1, Math.round(hours))} * * *`;
  if (hours === 24) return "0 3 * * *";
  if (hours >= 168) return "0 3 * * 0";
  return `0 3 */${Math.round(hours / 24)} * *`;
}

const UNSUPPORTED_MODIFIER = /\$(.*,)?(dnsrewrite|client|ctag)\b/;

function importUserRules(d: Draft, rules: string[]): void {
  const kept: string[] = [];
  for (const raw of rules) {
    const rule = raw.trim();
    if (rule === "" || rule.startsWith("!") || rule.startsWith("#")) continue;
    const hostsLine = /^(\S+)\s+(\S.*)$/.exec(rule);
    if (hostsLine && isIP(hostsLine[1] ?? "") !== 0 && !["0.0.0.0", "::", "127.0.0.1", "::1"].includes(hostsLine[1] ?? "")) {
      // `192.168.1.5 nas.lan`: AdGuard Home answers with the address: a local record here.
      for (const name of (hostsLine[2] ?? "").split(/\s+/)) if (!name.startsWith("#")) d.addHost(name, [hostsLine[1] ?? ""]);
      continue;
    }
    if (UNSUPPORTED_MODIFIER.test(rule)) {
      d.unsupportedSetting("user_rules", rule, "$dnsrewrite, $client and $ctag rules are not supported");
      continue;
    }
    kept.push(rule);
  }
  if (kept.length > 0) d.addBlockRules(kept, "adblock");
}

function importRewrites(d: Draft, f: Obj, prefix: string): void {
  const addrs = new Map<string, string[]>();
  for (const r of list(f.rewrites)) {
    if (bool(r.enabled) === false) continue;
    const domain = (str(r.domain) ?? "").toLowerCase();
    const answer = str(r.answer) ?? "";
    if (domain === "" || answer === "") continue;
    const rule = domain.startsWith("*.") ? `regexp:^.+\\.${domain.slice(2).replace(/[.*+?^${}()|[\]\\-]/g, "\\$&")}$` : domain;
    if (isIP(answer) !== 0) addrs.set(rule, [...(addrs.get(rule) ?? []), answer]);
    else if (answer === "A" || answer === "AAAA" || answer === domain) d.unsupportedSetting(`${prefix}rewrites`, { domain, answer }, "an exception to a wider rewrite has no equivalent");
    else if (domain.startsWith("*.")) d.unsupportedSetting(`${prefix}rewrites`, { domain, answer }, "a wildcard CNAME rewrite has no equivalent");
    else d.addRedirect(domain, answer);
  }
  for (const [rule, ips] of addrs) d.addHost(rule, ips);
}

function importHttpAndLogs(d: Draft, doc: Obj): void {
  const http = obj(doc.http);
  const address = str(http.address) ?? (str(doc.bind_host) !== undefined ? hostPort(str(doc.bind_host) ?? "", num(doc.bind_port) ?? 3000) : undefined);
  if (address !== undefined) {
    const m = /^(.*):(\d+)$/.exec(address);
    const host = (m?.[1] ?? "").replace(/^\[|\]$/g, "");
    const loopback = host === "127.0.0.1" || host === "::1" || host === "localhost";
    const listen = loopback ? address : `127.0.0.1:${m?.[2] ?? "3000"}`;
    d.setApi(listen);
    if (!loopback) d.note(`http.address ${address}: the management API listens on ${listen} until api.http.auth has users (hashes from sluice passwd; AdGuard Home's bcrypt passwords cannot be carried over)`);
  }
  if (active(doc.users)) d.unsupportedSetting("users", list(doc.users).map((u) => str(u.name)), "set api.http.auth.users with hashes from `sluice passwd`");
  reportRest(d, "http.", http, ["address", "session_ttl"], ["pprof"]);
  const q = obj(doc.querylog);
  const s = obj(doc.statistics);
  const recording = bool(q.enabled) !== false && (isObj(doc.querylog) || num(doc.querylog_interval) !== undefined);
  if (recording || bool(s.enabled) === true) {
    const interval = str(q.interval);
    const days = interval !== undefined ? goHours(interval) / 24 : (num(q.interval) ?? num(doc.querylog_interval) ?? 90);
    d.setRecorder({ retention_days: days > 0 ? days : 90 });
    if (!recording) d.note("statistics.enabled: the dashboard's statistics come from the query recorder, which is on");
  }
  for (const [key, section] of [["querylog", q], ["statistics", s]] as const) {
    if (active(section.ignored) && bool(section.ignored_enabled) !== false) d.unsupportedSetting(`${key}.ignored`, section.ignored, "every query is recorded");
    reportRest(d, `${key}.`, section, ["enabled", "interval", "ignored", "ignored_enabled"], ["file_enabled", "size_memory", "dir_path"]);
  }
}
