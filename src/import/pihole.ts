// `sluice import pihole`: Pi-hole v6's pihole.toml and its gravity.db (lists, domains, groups and
// clients) → a Sluice configuration. The mapping is in docs/operations.md, "Moving from another tool".

import { existsSync, readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, join } from "node:path";
import { Draft, type BlockAnswer } from "./draft.js";
import { importGravity } from "./pihole-gravity.js";
import { parseToml, TomlError, type TomlTable } from "./toml.js";
import { ImportError, type Importer } from "./types.js";
import { bool, num, obj, str, strings, type Obj } from "./values.js";

/** Pi-hole v6's defaults for the [dns] settings that have no equivalent: a value that differs is reported. */
const DNS_DEFAULTS: Record<string, unknown> = {
  CNAMEdeepInspect: true,
  blockESNI: true,
  EDNS0ECS: true,
  ignoreLocalhost: false,
  showDNSSEC: true,
  analyzeOnlyAandAAAA: false,
  piholePTR: "PI.HOLE",
  replyWhenBusy: "ALLOW",
  expandHosts: false,
  dnssec: false,
  hostRecord: "",
  localise: true,
};

const PRIVATE_REVERSE = ["10.in-addr.arpa", ...Array.from({ length: 16 }, (_, i) => `${16 + i}.172.in-addr.arpa`), "168.192.in-addr.arpa"];

export const importConfig: Importer = async (path) => {
  const dir = existsSync(path) && statSync(path).isDirectory();
  const file = dir ? join(path, "pihole.toml") : path;
  let doc: TomlTable;
  try {
    doc = parseToml(readFileSync(file, "utf8"));
  } catch (err) {
    if (err instanceof TomlError) throw new ImportError(`${file}: ${err.message}`);
    throw new ImportError(`${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const dns = obj(doc.dns);
  if (!("dns" in doc) || !("upstreams" in dns || "listeningMode" in dns || "port" in dns)) throw new ImportError(`${file}: not a Pi-hole v6 pihole.toml (no [dns] table with upstreams, port or listeningMode)`);
  const d = new Draft("Pi-hole");

  importListening(d, dns);
  d.addUpstreams("dns.upstreams", strings(dns.upstreams));
  importCache(d, obj(dns.cache));
  importLocal(d, dns);
  importReverse(d, dns);
  if (dns.domainNeeded === true) d.addGuard({ matches: "qname regexp:^[^.]+$", exec: "reject NXDOMAIN" });
  if (dns.bogusPriv !== false) d.addGuard({ matches: ["qtype PTR", `qname ${PRIVATE_REVERSE.map((z) => `domain:${z}`).join(" ")}`], exec: "reject NXDOMAIN" });
  importSpecialDomains(d, obj(dns.specialDomains));
  const blocking = obj(dns.blocking);
  const active = bool(blocking.active) !== false;
  if (active) importBlockingMode(d, dns);
  else d.note("dns.blocking.active is false: nothing is blocked (the allow lists and local records are imported)");
  for (const [k, def] of Object.entries(DNS_DEFAULTS)) if (k in dns && JSON.stringify(dns[k]) !== JSON.stringify(def)) d.unsupportedSetting(`dns.${k}`, dns[k]);
  const rate = obj(dns.rateLimit);
  if ((num(rate.count) ?? 0) > 0) d.unsupportedSetting("dns.rateLimit", { count: rate.count, interval: rate.interval }, "no per-client rate limit is set up (see the rate_limiter matcher)");
  const reply = obj(obj(dns.reply).host);
  if (reply.force4 === true || reply.force6 === true) d.unsupportedSetting("dns.reply.host", reply, "pi.hole's own address is not answered");
  if (str(blocking.edns) !== undefined && str(blocking.edns) !== "TEXT" && str(blocking.edns) !== "NONE") d.unsupportedSetting("dns.blocking.edns", blocking.edns);

  if (bool(obj(doc.dhcp).active) === true) d.unsupportedSetting("dhcp.active", true, "Sluice is not a DHCP server");
  const misc = obj(doc.misc);
  if (strings(misc.dnsmasq_lines).length > 0) d.unsupportedSetting("misc.dnsmasq_lines", misc.dnsmasq_lines, "dnsmasq options are not read");
  if (misc.etc_dnsmasq_d === true) d.unsupportedSetting("misc.etc_dnsmasq_d", true, "/etc/dnsmasq.d is not read");
  if (dns.queryLogging !== false) {
    const days = num(obj(doc.database).maxDBdays) ?? 91;
    d.setRecorder({ retention_days: days > 0 ? days : 91 });
  }
  d.setApi("127.0.0.1:9080");
  d.note("the dashboard and API listen on 127.0.0.1:9080 (api.http); Pi-hole's web server settings ([webserver]) are not carried over");

  const gravity = [join(dir ? path : dirname(file), "gravity.db"), str(obj(doc.files).gravity) ?? ""].find((p) => p !== "" && existsSync(p));
  if (gravity === undefined) d.note("no gravity.db beside pihole.toml: no lists, domains or clients imported");
  else importGravity(d, gravity, active);
  return Promise.resolve(d.build());
};

function importListening(d: Draft, dns: Obj): void {
  const port = num(dns.port) ?? 53;
  if (port === 0) {
    d.note("dns.port is 0 (Pi-hole's DNS was off): listening on 127.0.0.1:53");
    return;
  }
  const mode = (str(dns.listeningMode) ?? "LOCAL").toUpperCase();
  d.addListen(`0.0.0.0:${port}`);
  const iface = str(dns.interface) ?? "";
  const notes: Record<string, string> = {
    LOCAL: "dns.listeningMode LOCAL: Sluice answers whoever reaches 0.0.0.0; Pi-hole answered only devices on its local networks (add a `client_ip` rule, or listen on the LAN address)",
    ALL: "dns.listeningMode ALL: listening on 0.0.0.0",
    SINGLE: `dns.listeningMode SINGLE (${iface || "the default interface"}): listening on 0.0.0.0; put that interface's address in the listen addresses`,
    BIND: `dns.listeningMode BIND (${iface || "the default interface"}): listening on 0.0.0.0; put that interface's address in the listen addresses`,
    NONE: "dns.listeningMode NONE: the listen addresses came from dnsmasq options; listening on 0.0.0.0",
  };
  d.note(notes[mode] ?? `dns.listeningMode ${mode}: listening on 0.0.0.0`);
}

function importCache(d: Draft, cache: Obj): void {
  const size = num(cache.size);
  if (size === 0) {
    d.disableCache();
    return;
  }
  const optimizer = num(cache.optimizer);
  d.setCache({ size, serveStale: optimizer !== undefined && optimizer > 0 ? optimizer : undefined });
  if (optimizer !== undefined && optimizer > 0) d.note(`dns.cache.optimizer ${optimizer}: expired answers are served for ${optimizer}s while refreshed (lazy_cache_ttl)`);
}

/** dns.hosts ("ip name [name...]") → local records; dns.cnameRecords ("alias[,alias...],target[,ttl]") → local CNAMEs. */
function importLocal(d: Draft, dns: Obj): void {
  const byName = new Map<string, string[]>();
  for (const line of strings(dns.hosts)) {
    const [ip, ...names] = line.trim().split(/\s+/);
    if (ip === undefined || isIP(ip) === 0 || names.length === 0) {
      d.unsupportedSetting("dns.hosts", line, "not an 'address name' line");
      continue;
    }
    for (const n of names) if (!n.startsWith("#")) byName.set(n.toLowerCase(), [...(byName.get(n.toLowerCase()) ?? []), ip]);
  }
  for (const [name, ips] of byName) d.addHost(name, ips);
  for (const line of strings(dns.cnameRecords)) {
    const parts = line.split(",").map((p) => p.trim());
    if (parts.length > 2 && /^\d+$/.test(parts[parts.length - 1] ?? "")) parts.pop();
    const target = parts.pop();
    if (target === undefined || parts.length === 0) {
      d.unsupportedSetting("dns.cnameRecords", line, "not an 'alias,target' line");
      continue;
    }
    for (const alias of parts) d.addRedirect(alias.toLowerCase(), target.toLowerCase());
  }
}

/** The reverse zone of a CIDR, rounded out to whole labels (octets, nibbles). */
export function reverseZone(cidr: string): string | null {
  const [addr = "", bitsText = ""] = cidr.split("/");
  const bits = Number(bitsText);
  if (isIP(addr) === 4 && bits >= 0 && bits <= 32) {
    const octets = addr.split(".").slice(0, Math.floor(bits / 8));
    return [...octets.reverse(), "in-addr.arpa"].join(".");
  }
  if (isIP(addr) === 6 && bits >= 0 && bits <= 128) {
    const [head = "", tail = ""] = addr.split("::");
    const groups = (s: string): string[] => (s === "" ? [] : s.split(":"));
    const h = groups(head);
    const t = groups(tail);
    const full = [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t].map((g) => g.padStart(4, "0")).join("");
    return [...full.slice(0, Math.floor(bits / 4)).split("").reverse(), "ip6.arpa"].join(".");
  }
  return null;
}

/** dns.revServers ("enabled,cidr,server[#port],domain") → the domain and the network's reverse zone go to that server. */
function importReverse(d: Draft, dns: Obj): void {
  for (const line of strings(dns.revServers)) {
    const [enabled, cidr = "", server = "", domain = ""] = line.split(",").map((p) => p.trim());
    if (enabled !== "true") continue;
    const zone = reverseZone(cidr);
    const bits = Number(cidr.split("/")[1]);
    if (zone === null || server === "") {
      d.unsupportedSetting("dns.revServers", line, "not 'true,cidr,server,domain'");
      continue;
    }
    if (bits % (isIP(cidr.split("/")[0] ?? "") === 4 ? 8 : 4) !== 0) d.note(`dns.revServers ${cidr}: its reverse zone is taken as ${zone}, the whole labels that hold it`);
    d.addConditional("dns.revServers", domain === "" ? [zone] : [domain, zone], [server]);
  }
}

function importSpecialDomains(d: Draft, special: Obj): void {
  if (special.mozillaCanary !== false) d.addGuard({ matches: "qname full:use-application-dns.net", exec: "reject NXDOMAIN" });
  if (special.iCloudPrivateRelay !== false) d.addGuard({ matches: "qname full:mask.icloud.com full:mask-h2.icloud.com", exec: "reject NXDOMAIN" });
  if (special.designatedResolver !== false) d.addGuard({ matches: "qname full:_dns.resolver.arpa", exec: "reject nodata" });
}

function importBlockingMode(d: Draft, dns: Obj): void {
  const mode = (str(obj(dns.blocking).mode) ?? "NULL").toUpperCase();
  const ttl = num(dns.blockTTL) ?? 2;
  const fixed: Record<string, BlockAnswer> = { NULL: { mode: "null" }, NX: { mode: "nxdomain" }, NODATA: { mode: "nodata" } };
  if (fixed[mode]) {
    d.setBlockAnswer(fixed[mode], ttl);
    return;
  }
  const reply = obj(obj(dns.reply).blocking);
  const ips = [reply.force4 === true ? str(reply.IPv4) : undefined, reply.force6 === true && mode === "IP" ? str(reply.IPv6) : undefined].filter((x): x is string => x !== undefined && isIP(x) !== 0);
  if (ips.length > 0) d.setBlockAnswer({ mode: "custom", ips }, ttl);
  else {
    d.setBlockAnswer({ mode: "null" }, ttl);
    d.unsupportedSetting("dns.blocking.mode", mode, "Pi-hole's own address is not known here: answered 0.0.0.0 / :: (set dns.reply.blocking.IPv4/IPv6 with force4/force6 to keep it)");
  }
}
