// @ts-check
// Configurations for the reference servers: unbound and dnsmasq answering the benchmark names locally,
// caching in front of the upstream, or forwarding to it with their caches off. Each gets one thread.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ANSWER_IP, PASS_SUFFIX, PREFETCH_NAMES, PREFETCH_TTL, localNames, prefetchName } from "./data.mjs";

/**
 * What a reference server does in a scenario:
 * - `local`: answers the 1 000-name set from local data;
 * - `domain-set`: NXDOMAIN for every blocked name (the rules as zones), an address for the rest;
 * - `cache`: forwards to the upstream with its cache on (cache-hot, tcp);
 * - `forward`: forwards to the upstream with its cache off.
 * @typedef {"local" | "domain-set" | "cache" | "forward"} RefMode
 */

/**
 * @typedef {object} RefData
 * @property {string[]} blockedZones  full: and domain: rule names (answered NXDOMAIN with their subdomains)
 * @property {string[]} keywordHits   queried names that match a keyword: rule (listed one by one)
 */

/** @param {number} port @param {string} dir */
function unboundServer(port, dir) {
  return [
    "server:",
    "  do-daemonize: no",
    '  chroot: ""',
    '  username: ""',
    `  directory: "${dir}"`,
    '  pidfile: ""',
    "  use-syslog: no",
    '  logfile: ""',
    "  verbosity: 0",
    "  interface: 127.0.0.1",
    `  port: ${port}`,
    "  num-threads: 1",
    "  access-control: 127.0.0.0/8 allow",
    "  do-ip6: no",
    "  so-reuseport: no",
    // The same 4 MB socket buffers Sluice and the ceiling ask for, so bursts are not dropped by the kernel.
    "  so-rcvbuf: 4m",
    "  so-sndbuf: 4m",
    "  incoming-num-tcp: 64",
    '  module-config: "iterator"',
    "  do-not-query-localhost: no",
    "  qname-minimisation: no",
    "  minimal-responses: yes",
    // unbound serves test. as an empty local zone by default (RFC 6761); the benchmark names live under it.
    '  local-zone: "test." nodefault',
  ];
}

/**
 * @typedef {object} Encrypted  DoT or DoH on the TCP side of the port (UDP stays plain DNS, for the readiness probe)
 * @property {"dot" | "doh"} mode
 * @property {string} cert
 * @property {string} key
 */

/**
 * Writes an unbound configuration into `dir` and returns its path.
 * @param {{ name: string, port: number, dir: string, mode: RefMode, upstreamPort?: number, data?: RefData, encrypted?: Encrypted }} o
 */
export async function unboundConfig(o) {
  const lines = unboundServer(o.port, o.dir);
  if (o.encrypted) {
    lines.push(`  tls-service-key: "${o.encrypted.key}"`, `  tls-service-pem: "${o.encrypted.cert}"`);
    if (o.encrypted.mode === "dot") lines.push(`  tls-port: ${o.port}`);
    else lines.push(`  https-port: ${o.port}`, '  http-endpoint: "/dns-query"');
  }
  if (o.mode === "local") {
    lines.push('  local-zone: "bench.test." static');
    for (const n of localNames()) lines.push(`  local-data: "${n}. 3600 IN A ${ANSWER_IP}"`);
    // The prefetch scenario's names, with a TTL short enough that a cache keeps asking for them.
    for (let i = 0; i < PREFETCH_NAMES; i++) lines.push(`  local-data: "${prefetchName(i)}. ${PREFETCH_TTL} IN A ${ANSWER_IP}"`);
  } else if (o.mode === "domain-set") {
    if (!o.data) throw new Error("domain-set needs its data");
    for (const z of o.data.blockedZones) lines.push(`  local-zone: "${z}." always_nxdomain`);
    for (const n of o.data.keywordHits) lines.push(`  local-zone: "${n}." always_nxdomain`);
    lines.push(`  local-zone: "${PASS_SUFFIX}." redirect`, `  local-data: "${PASS_SUFFIX}. 3600 IN A ${ANSWER_IP}"`);
  } else {
    if (o.mode === "forward") {
      // Cache off as far as unbound allows: tiny caches, and nothing kept past its arrival.
      lines.push("  msg-cache-size: 0", "  rrset-cache-size: 0", "  cache-max-ttl: 0", "  cache-max-negative-ttl: 0", "  prefetch: no");
    } else {
      lines.push("  msg-cache-size: 16m", "  rrset-cache-size: 32m");
    }
    lines.push("forward-zone:", '  name: "."', `  forward-addr: 127.0.0.1@${o.upstreamPort}`);
  }
  const path = join(o.dir, `${o.name}.conf`);
  await writeFile(path, lines.join("\n") + "\n");
  return path;
}

/**
 * dnsmasq arguments for a scenario (writing its conf file into `dir` where one is needed).
 * @param {{ name: string, port: number, dir: string, mode: RefMode, upstreamPort?: number, data?: RefData }} o
 */
export async function dnsmasqArgs(o) {
  // --keep-in-foreground without --no-daemon: in --no-daemon (debug) mode dnsmasq serves one TCP connection at a
  // time instead of forking for each, and the TCP scenario would starve every connection but one.
  const args = [
    "--keep-in-foreground",
    `--port=${o.port}`,
    "--listen-address=127.0.0.1",
    "--bind-interfaces",
    "--no-resolv",
    "--no-hosts",
    "--user=root",
    "--pid-file=",
    "--log-facility=-",
  ];
  if (o.mode === "local") {
    args.push("--conf-file=/dev/null", `--address=/bench.test/${ANSWER_IP}`);
  } else if (o.mode === "domain-set") {
    if (!o.data) throw new Error("domain-set needs its data");
    const lines = [...o.data.blockedZones, ...o.data.keywordHits].map((z) => `address=/${z}/`);
    lines.push(`address=/${PASS_SUFFIX}/${ANSWER_IP}`);
    const path = join(o.dir, `${o.name}.conf`);
    await writeFile(path, lines.join("\n") + "\n");
    args.push(`--conf-file=${path}`);
  } else {
    args.push("--conf-file=/dev/null", `--server=127.0.0.1#${o.upstreamPort}`, "--dns-forward-max=1024");
    args.push(o.mode === "forward" ? "--cache-size=0" : "--cache-size=10000");
  }
  return args;
}
