// AdGuard Home's persistent clients and its encrypted listeners (DoT, DoH), for src/import/adguardhome.ts.

import { isIP } from "node:net";
import { normaliseUpstream, type Draft } from "./draft.js";
import { active, bool, list, num, obj, reportRest, str, strings, type Obj } from "./values.js";

const MAC = /^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$/i;
const CLIENT_ID = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/** `192.168.1.0/24`, `fd00::/64`. */
function isCidr(s: string): boolean {
  const [addr, bits, ...rest] = s.split("/");
  return rest.length === 0 && bits !== undefined && /^\d{1,3}$/.test(bits) && isIP(addr ?? "") !== 0;
}

/** clients.persistent → the `clients` provider; a client with filtering off skips the block lists, one with upstreams gets its own forward. */
export function importClients(d: Draft, clients: Obj): void {
  for (const [i, c] of list(clients.persistent).entries()) {
    const name = str(c.name) ?? `client-${i + 1}`;
    const key = `clients.persistent[${name}]`;
    const addresses: string[] = [];
    const macs: string[] = [];
    const ids: string[] = [];
    for (const id of strings(c.ids)) {
      if (isIP(id) !== 0 || isCidr(id)) addresses.push(id);
      else if (MAC.test(id)) macs.push(id);
      else if (CLIENT_ID.test(id)) ids.push(id.toLowerCase());
      else d.unsupportedSetting(`${key}.ids`, id, "neither an address, a CIDR, a MAC nor a ClientID");
    }
    const global = bool(c.use_global_settings) !== false;
    const blocking = global ? undefined : bool(c.filtering_enabled) !== false;
    if (!global) {
      for (const k of ["parental_enabled", "safebrowsing_enabled"]) if (c[k] === true) d.unsupportedSetting(`${key}.${k}`, true, "no parental control or safe browsing service here");
      if (bool(obj(c.safe_search).enabled) === true || c.safesearch_enabled === true) d.unsupportedSetting(`${key}.safe_search`, true, "no safe search here");
    }
    if (bool(c.use_global_blocked_services) === false && active(obj(c.blocked_services).ids ?? c.blocked_services)) {
      d.unsupportedSetting(`${key}.blocked_services`, obj(c.blocked_services).ids ?? c.blocked_services, "no blocked-services catalogue");
    }
    const upstreams: string[] = [];
    for (const u of strings(c.upstreams)) {
      if (u.trim() === "" || u.trim().startsWith("#")) continue;
      if (u.trim().startsWith("[/")) d.unsupportedSetting(`${key}.upstreams`, u, "per-domain upstreams of one client have no equivalent");
      else upstreams.push(...u.trim().split(/\s+/));
    }
    const addrs: string[] = [];
    for (const u of upstreams) {
      const addr = normaliseUpstream(u);
      if (addr === null) d.unsupportedSetting(`${key}.upstreams`, u, "protocol not in this build");
      else addrs.push(addr);
    }
    for (const k of ["ignore_querylog", "ignore_statistics"]) if (c[k] === true) d.unsupportedSetting(`${key}.${k}`, true, "every client's queries are recorded");
    if (bool(c.upstreams_cache_enabled) === true) d.note(`${key}: its own upstream cache is the shared cache here`);
    d.addClient({ name, addresses, macs, ids, groups: strings(c.tags), upstreams: addrs, blocking });
  }
  const sources = obj(clients.runtime_sources);
  const runtime = Object.entries(sources).filter(([, v]) => v === true).map(([k]) => k);
  if (runtime.length > 0) d.note(`clients.runtime_sources (${runtime.join(", ")}): the clients provider learns MACs from the neighbour table; host names by PTR need its 'hostnames' setting`);
}

/** tls → DoT (tcp_server with cert/key) and DoH (http_server) listeners when certificate files or PEM text are given. */
export function importTls(d: Draft, tls: Obj, bindHosts: string[]): void {
  if (bool(tls.enabled) !== true) return;
  let cert = str(tls.certificate_path) ?? "";
  let key = str(tls.private_key_path) ?? "";
  if (cert === "" && (str(tls.certificate_chain) ?? "") !== "") {
    cert = "tls/cert.pem";
    d.files[cert] = str(tls.certificate_chain) ?? "";
  }
  if (key === "" && (str(tls.private_key) ?? "") !== "") {
    key = "tls/key.pem";
    d.files[key] = str(tls.private_key) ?? "";
  }
  const dot = num(tls.port_dns_over_tls) ?? 853;
  const https = num(tls.port_https) ?? 443;
  if (cert === "" || key === "") {
    d.unsupportedSetting("tls.enabled", true, "no certificate and key given: DoT and DoH are not served");
  } else {
    const at = (h: string, p: number): string => (isIP(h) === 6 ? `[${h}]:${p}` : `${h}:${p}`);
    for (const [i, h] of bindHosts.entries()) {
      const n = i === 0 ? "" : `_${i + 1}`;
      if (dot > 0) d.addServer({ tag: `dot${n}`, type: "tcp_server", args: { entry: "main", listen: at(h, dot), cert, key } });
      if (https > 0) d.addServer({ tag: `doh${n}`, type: "http_server", args: { listen: at(h, https), entries: [{ path: "/dns-query", exec: "main" }], cert, key } });
    }
    if (https > 0) d.note(`tls.port_https ${https}: DNS over HTTPS is served there at /dns-query (and /dns-query/<ClientID>); the dashboard is on the management API's own address`);
  }
  if ((num(tls.port_dns_over_quic) ?? 0) > 0) d.unsupportedSetting("tls.port_dns_over_quic", tls.port_dns_over_quic, "DNS over QUIC is not served");
  if ((num(tls.port_dnscrypt) ?? 0) > 0) d.unsupportedSetting("tls.port_dnscrypt", tls.port_dnscrypt, "DNSCrypt is not served");
  if ((str(tls.server_name) ?? "") !== "") d.note(`tls.server_name ${str(tls.server_name)}: DoT ClientIDs (<id>.${str(tls.server_name)}) need it in the clients provider's tls_server_names`);
  reportRest(d, "tls.", tls, [
    "enabled",
    "certificate_path",
    "private_key_path",
    "certificate_chain",
    "private_key",
    "port_dns_over_tls",
    "port_https",
    "port_dns_over_quic",
    "port_dnscrypt",
    "server_name",
    "dnscrypt_config_file",
  ]);
}
