// The `ros_address_list` args: OxiDNS's names (address, username, password, async, wait_timeout,
// queue_capacity, address_list4/6, comment_prefix, min_ttl, max_ttl, fixed_ttl, cleanup_on_shutdown,
// persistent, tls, connect/send/receive_timeout) plus Sluice's own (timeout, ca, insecure_skip_verify,
// batch_interval, batch_size, retries, retry_interval, reconcile_interval). Pure: `check` runs them
// without touching the network or the files.

import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { formatIP, maskIP } from "../../../dns/ip.js";
import { durationProblem, durationSchema, parseDuration } from "../../../engine/duration.js";
import { parseIpRule } from "../../../engine/rules/ip.js";
import { splitFields } from "../../../engine/rules/source.js";
import { ArgError, type ArgProblem } from "../../../registry/types.js";

export interface RosArgs {
  address: string;
  username: string;
  password: string;
  async: boolean;
  wait_timeout: number | string;
  queue_capacity: number;
  address_list4?: string;
  address_list6?: string;
  comment_prefix: string;
  min_ttl: number;
  max_ttl: number;
  fixed_ttl?: number;
  cleanup_on_shutdown: boolean;
  persistent?: { ips?: string[]; files?: string[] };
  timeout: number | string;
  connect_timeout?: number;
  send_timeout?: number;
  receive_timeout?: number;
  ca?: string;
  insecure_skip_verify: boolean;
  tls?: { server_name?: string; ca?: string; insecure?: boolean };
  batch_interval: number | string;
  batch_size: number;
  retries: number;
  retry_interval: number | string;
  reconcile_interval: number | string;
}

/** RouterOS's binary API ports (api, api-ssl): OxiDNS talks to them; the REST API is served by www/www-ssl. */
const BINARY_API_PORTS = new Set(["8728", "8729"]);

const listName = { type: "string", minLength: 1, maxLength: 255 } as const;
const seconds = { type: "integer", minimum: 1, maximum: 3600 } as const;

export const rosSchema = {
  type: "object",
  additionalProperties: false,
  required: ["address", "username", "password"],
  properties: {
    address: { type: "string", minLength: 1 },
    username: { type: "string", minLength: 1 },
    password: { type: "string" },
    async: { type: "boolean", default: true },
    wait_timeout: { ...durationSchema, default: "8s" },
    queue_capacity: { type: "integer", minimum: 1, maximum: 1_000_000, default: 1024 },
    address_list4: listName,
    address_list6: listName,
    comment_prefix: { type: "string", minLength: 1, maxLength: 64, default: "sluice" },
    min_ttl: { type: "integer", minimum: 0, maximum: 31_536_000, default: 60 },
    max_ttl: { type: "integer", minimum: 0, maximum: 31_536_000, default: 3600 },
    fixed_ttl: { type: "integer", minimum: 0, maximum: 31_536_000 },
    cleanup_on_shutdown: { type: "boolean", default: true },
    persistent: {
      type: "object",
      additionalProperties: false,
      properties: { ips: { type: "array", items: { type: "string" } }, files: { type: "array", items: { type: "string", minLength: 1 } } },
    },
    timeout: { ...durationSchema, default: "10s" },
    connect_timeout: seconds,
    send_timeout: seconds,
    receive_timeout: seconds,
    ca: { type: "string", minLength: 1 },
    insecure_skip_verify: { type: "boolean", default: false },
    tls: {
      type: "object",
      additionalProperties: false,
      properties: { server_name: { type: "string", minLength: 1 }, ca: { type: "string", minLength: 1 }, insecure: { type: "boolean" } },
    },
    batch_interval: { ...durationSchema, default: "100ms" },
    batch_size: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
    retries: { type: "integer", minimum: 0, maximum: 100, default: 5 },
    retry_interval: { ...durationSchema, default: "1s" },
    reconcile_interval: { ...durationSchema, default: "180s" },
  },
} as const;

/** The REST root of the router: `https://host[:port]/rest` from `host`, `host:port`, `[v6]:port` or a URL. */
export function restBase(address: string): URL {
  const text = address.trim();
  let url: URL;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    try {
      url = new URL(text);
    } catch {
      throw new Error(`'${address}' is not a URL`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error(`only https (www-ssl) and http (www) reach the REST API (got '${url.protocol.replace(/:$/, "")}')`);
    if (url.username !== "" || url.password !== "") throw new Error("put the credentials in username and password, not in the address");
    if (url.search !== "" || url.hash !== "") throw new Error("the address takes no query string or fragment");
  } else {
    // A bare IPv6 address has colons but no brackets.
    const host = isIP(text) === 6 ? `[${text}]` : text;
    try {
      url = new URL(`https://${host}`);
    } catch {
      throw new Error(`'${address}' is not a host, host:port or URL`);
    }
    if (url.pathname !== "/" || url.host === "") throw new Error(`'${address}' is not a host, host:port or URL`);
    if (BINARY_API_PORTS.has(url.port)) {
      throw new Error(
        `port ${url.port} is RouterOS's binary API (api/api-ssl); Sluice uses the REST API of the www-ssl service: give the router's host (HTTPS, port 443), or https://host:port for another www-ssl port`,
      );
    }
  }
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/rest";
  url.pathname = url.pathname.replace(/\/+$/, "");
  return url;
}

/** An address or CIDR in the form RouterOS lists it: a host as the bare address, a network as `net/bits` (host bits cleared). */
export function normalizeAddress(text: string): { family: 4 | 6; address: string } | null {
  let rule: { ip: Uint8Array; bits: number };
  try {
    rule = parseIpRule(text.trim());
  } catch {
    return null;
  }
  const max = rule.ip.length * 8;
  const family = rule.ip.length === 4 ? 4 : 6;
  return { family, address: rule.bits === max ? formatIP(rule.ip) : `${formatIP(maskIP(rule.ip, rule.bits))}/${rule.bits}` };
}

export function checkRosArgs(args: RosArgs): ArgProblem[] {
  const problems: ArgProblem[] = [];
  try {
    restBase(args.address);
  } catch (err) {
    problems.push({ path: ["address"], message: (err as Error).message });
  }
  if (args.address_list4 === undefined && args.address_list6 === undefined) problems.push({ path: [], message: "set address_list4, address_list6 or both" });
  if (/[;=]/.test(args.comment_prefix)) problems.push({ path: ["comment_prefix"], message: "comment_prefix must not contain ';' or '='" });
  if (args.min_ttl > args.max_ttl) problems.push({ path: ["min_ttl"], message: `min_ttl (${args.min_ttl}) is above max_ttl (${args.max_ttl})` });
  const durations: [keyof RosArgs, number, number][] = [
    ["wait_timeout", 1, 3_600_000],
    ["timeout", 1, 3_600_000],
    ["batch_interval", 0, 60_000],
    ["retry_interval", 1, 3_600_000],
    ["reconcile_interval", 10, 86_400_000],
  ];
  for (const [key, min, max] of durations) {
    const problem = durationProblem(key, args[key] as number | string, min, max);
    if (problem) problems.push({ path: [key], message: problem });
  }
  if (args.tls?.ca !== undefined && args.ca !== undefined) problems.push({ path: ["tls", "ca"], message: "set the CA once: ca or tls.ca" });
  const ca = args.ca ?? args.tls?.ca;
  const insecure = args.insecure_skip_verify || args.tls?.insecure === true;
  if (ca !== undefined && insecure) problems.push({ path: args.ca !== undefined ? ["ca"] : ["tls", "ca"], message: "a CA and insecure_skip_verify (tls.insecure) cannot be used together" });
  (args.persistent?.ips ?? []).forEach((ip, i) => {
    const n = normalizeAddress(ip);
    if (n === null) problems.push({ path: ["persistent", "ips", i], message: `'${ip}' is not an IP address or CIDR` });
    else if (listFor(args, n.family) === undefined) problems.push({ path: ["persistent", "ips", i], message: `'${ip}' is IPv${n.family} but address_list${n.family} is not set` });
  });
  return problems;
}

export const listFor = (args: RosArgs, family: 4 | 6): string | undefined => (family === 4 ? args.address_list4 : args.address_list6);

/** Milliseconds of a duration arg that `check` accepted. */
export const ms = (value: number | string): number => parseDuration(value);

export interface PersistentAddress {
  family: 4 | 6;
  address: string;
}

/**
 * The persistent addresses: `ips`, then each file's lines (one address or CIDR per line, `#` comments),
 * read once here. A file line that is not an address, or whose family has no list, fails the create
 * with the file and line.
 */
export async function loadPersistent(args: RosArgs, resolvePath: (p: string) => string): Promise<PersistentAddress[]> {
  const out = new Map<string, PersistentAddress>();
  for (const ip of args.persistent?.ips ?? []) {
    const n = normalizeAddress(ip);
    if (n) out.set(`${n.family}|${n.address}`, n);
  }
  for (const [i, file] of (args.persistent?.files ?? []).entries()) {
    const path = resolvePath(file);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (err) {
      throw new ArgError(`cannot read ${path}: ${(err as Error).message}`, ["persistent", "files", i]);
    }
    for (const [n, line] of text.split(/\r?\n/).entries()) {
      const field = splitFields(line)[0];
      if (field === undefined) continue;
      const a = normalizeAddress(field);
      if (a === null) throw new ArgError(`${path}:${n + 1}: '${field}' is not an IP address or CIDR`, ["persistent", "files", i]);
      if (listFor(args, a.family) === undefined) throw new ArgError(`${path}:${n + 1}: '${field}' is IPv${a.family} but address_list${a.family} is not set`, ["persistent", "files", i]);
      out.set(`${a.family}|${a.address}`, a);
    }
  }
  return [...out.values()];
}
