// `ip_selector` args: OxiDNS's names and defaults, the JSON schema, the quick-setup parser, the checks
// `sluice check` runs, and their compiled form. OxiDNS gives the three timings as integer milliseconds;
// Sluice also takes a duration string there ("200ms", "1s"). Cache TTLs are integer seconds or a duration.

import { durationSchema, parseDuration } from "../../../engine/duration.js";
import { ArgError, type ArgProblem } from "../../../registry/types.js";

export type SelectionMode = "first_success" | "best_within_budget" | "background";
export const SELECTION_MODES: readonly SelectionMode[] = ["first_success", "best_within_budget", "background"];

export interface IpSelectorArgs {
  selection_mode: SelectionMode;
  probe_methods: string | string[];
  outbound?: string;
  socks5?: string;
  probe_stagger: number | string;
  probe_timeout: number | string;
  max_wait: number | string;
  top_n: number;
  dnssec_policy: "reorder_only" | "skip";
  max_parallel_probes: number;
  cache: { enabled: boolean; size: number; ttl: number | string; failure_ttl: number | string };
}

/** One way to score an address: a TCP connect to a port, or a method this build cannot run (`ping`). */
export type ProbeMethod = { kind: "tcp"; port: number; label: string } | { kind: "unavailable"; label: string };

export interface SelectorOptions {
  mode: SelectionMode;
  methods: ProbeMethod[];
  socks5: string | null;
  staggerMs: number;
  timeoutMs: number;
  maxWaitMs: number;
  topN: number;
  dnssecSkip: boolean;
  maxParallel: number;
  cache: { enabled: boolean; size: number; ttlMs: number; failureTtlMs: number };
}

/** The longest any timing may be: a probe holds a socket, and a waiting answer holds the client. */
const MAX_TIMING_MS = 60_000;
const msSchema = { type: ["integer", "string"], minimum: 0 } as const;

export const ipSelectorSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    selection_mode: { enum: SELECTION_MODES, default: "first_success" },
    probe_methods: {
      anyOf: [{ type: "string" }, { type: "array", items: { type: "string" }, minItems: 1, maxItems: 16 }],
      default: ["tcp:443", "tcp:80"],
    },
    outbound: { type: "string" },
    socks5: { type: "string" },
    probe_stagger: { ...msSchema, default: 200 },
    probe_timeout: { ...msSchema, default: 600 },
    max_wait: { ...msSchema, default: 1000 },
    top_n: { type: "integer", minimum: 0, maximum: 1000, default: 1 },
    dnssec_policy: { enum: ["reorder_only", "skip"], default: "reorder_only" },
    max_parallel_probes: { type: "integer", minimum: 1, maximum: 65_536, default: 256 },
    cache: {
      type: "object",
      additionalProperties: false,
      default: {},
      properties: {
        enabled: { type: "boolean", default: true },
        size: { type: "integer", minimum: 1, maximum: 10_000_000, default: 4096 },
        ttl: { ...durationSchema, default: 3600 },
        failure_ttl: { ...durationSchema, default: 60 },
      },
    },
  },
} as const;

/** An integer is milliseconds (OxiDNS); a string is a duration ("200ms", "1s"). */
function millis(value: number | string, key: string): number {
  if (typeof value === "number") return value;
  try {
    return parseDuration(value);
  } catch (err) {
    throw new ArgError((err as Error).message, [key]);
  }
}

function timing(value: number | string, key: string, minMs: number): number {
  const ms = millis(value, key);
  if (ms < minMs || ms > MAX_TIMING_MS) throw new ArgError(`${key} must be between ${minMs}ms and ${MAX_TIMING_MS / 1000}s (got ${ms}ms)`, [key]);
  return ms;
}

function seconds(value: number | string, key: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new ArgError((err as Error).message, ["cache", key]);
  }
}

function method(text: string, at: (string | number)[]): ProbeMethod | null {
  const t = text.trim().toLowerCase();
  if (t === "none") return null;
  if (t === "ping") return { kind: "unavailable", label: "ping" };
  const m = /^tcp:(\d{1,5})$/.exec(t);
  if (!m || Number(m[1]) < 1 || Number(m[1]) > 65_535) throw new ArgError(`'${text}' is not a probe method: write tcp:<port> (1-65535), ping or none`, at);
  return { kind: "tcp", port: Number(m[1]), label: t };
}

function methods(value: string | string[]): ProbeMethod[] {
  const list = typeof value === "string" ? [value] : value;
  const texts = list.flatMap((item, i) => item.split(/[\s,]+/).filter((s) => s !== "").map((s) => ({ s, at: typeof value === "string" ? ["probe_methods"] : ["probe_methods", i] })));
  const out: ProbeMethod[] = [];
  let none = false;
  for (const { s, at } of texts) {
    const m = method(s, at);
    if (m === null) none = true;
    else if (!out.some((o) => o.label === m.label)) out.push(m);
  }
  if (none && out.length > 0) throw new ArgError("'none' cannot be listed with other probe methods", ["probe_methods"]);
  return out;
}

function socks5(value: string | undefined): string | null {
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ArgError(`'${value}' is not a URL: write socks5://[user:pass@]host:port`, ["socks5"]);
  }
  if (url.protocol !== "socks5:" && url.protocol !== "socks5h:") throw new ArgError(`socks5 must be a socks5:// URL (got ${url.protocol}//)`, ["socks5"]);
  if (url.hostname === "" || url.pathname.replace(/^\/$/, "") !== "") throw new ArgError("socks5 must be socks5://[user:pass@]host:port with no path", ["socks5"]);
  return value;
}

/** The compiled args; throws an ArgError at the offending path. */
export function compileOptions(args: IpSelectorArgs): SelectorOptions {
  const c = args.cache;
  return {
    mode: args.selection_mode,
    methods: methods(args.probe_methods),
    socks5: socks5(args.socks5),
    staggerMs: timing(args.probe_stagger, "probe_stagger", 0),
    timeoutMs: timing(args.probe_timeout, "probe_timeout", 1),
    maxWaitMs: timing(args.max_wait, "max_wait", 1),
    topN: args.top_n,
    dnssecSkip: args.dnssec_policy === "skip",
    maxParallel: args.max_parallel_probes,
    cache: { enabled: c.enabled, size: c.size, ttlMs: seconds(c.ttl, "ttl"), failureTtlMs: seconds(c.failure_ttl, "failure_ttl") },
  };
}

export function optionProblems(args: IpSelectorArgs): ArgProblem[] {
  try {
    compileOptions(args);
    return [];
  } catch (err) {
    if (err instanceof ArgError) return [{ path: err.path, message: err.message }];
    throw err;
  }
}

/** `ip_selector [mode] [method,method...]`: words in any order; a mode word, and methods (commas or spaces). */
export function parseQuickSetup(param: string): Partial<IpSelectorArgs> {
  const out: Partial<IpSelectorArgs> = {};
  const found: string[] = [];
  for (const word of param.split(/\s+/).filter((w) => w !== "")) {
    if ((SELECTION_MODES as readonly string[]).includes(word)) {
      if (out.selection_mode !== undefined) throw new ArgError(`two selection modes: '${out.selection_mode}' and '${word}'`);
      out.selection_mode = word as SelectionMode;
    } else {
      found.push(...word.split(",").filter((s) => s !== ""));
    }
  }
  if (found.length > 0) {
    methods(found);
    out.probe_methods = found;
  }
  return out;
}
