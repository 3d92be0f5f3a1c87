// forward's arguments: the schema (OxiDNS's names, plus ours: response_selection, outbound, ca,
// min_conns on every pooled protocol), the checks the schema cannot make, and the quick setup.

import { durationSchema, parseDuration } from "../../../engine/duration.js";
import { parseBootstrap, parseDialAddr, parseUpstreamAddr } from "../../../engine/upstream/address.js";
import { parseSocks5 } from "../../../net/socks5.js";
import { ArgError, type ArgProblem, type CheckEnv } from "../../../registry/types.js";

export interface UpstreamArgs {
  addr: string;
  tag?: string;
  timeout?: number | string;
  bootstrap?: string | string[];
  bootstrap_version?: 4 | 6;
  enable_pipeline?: boolean;
  max_conns?: number;
  min_conns?: number;
  idle_timeout?: number | string;
  insecure_skip_verify?: boolean;
  dial_addr?: string;
  port?: number;
  ca?: string;
  socks5?: string;
  outbound?: string;
}

export const RESPONSE_SELECTIONS = ["fastest", "balanced", "prefer_positive", "consensus"] as const;
export type ResponseSelection = (typeof RESPONSE_SELECTIONS)[number];

export interface ForwardArgs {
  upstreams: UpstreamArgs[];
  concurrent: number;
  short_circuit: boolean;
  response_selection: ResponseSelection;
  /** Egress profile of every upstream that names none itself. */
  outbound?: string;
}

/** How many upstreams a quick setup with several addresses asks at once. */
export const QUICK_SETUP_CONCURRENT = 3;
export const MAX_CONCURRENT = 32;
/** max_conns when the upstream does not say (src/engine/upstream/upstream.ts). */
const DEFAULT_MAX_CONNS = 2;

const bootstrapItem = { type: "string", minLength: 1 } as const;

export const schema = {
  type: "object",
  additionalProperties: false,
  required: ["upstreams"],
  properties: {
    upstreams: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["addr"],
        properties: {
          addr: { type: "string", minLength: 1 },
          tag: { type: "string", minLength: 1 },
          timeout: durationSchema,
          bootstrap: { anyOf: [bootstrapItem, { type: "array", minItems: 1, maxItems: 8, items: bootstrapItem }] },
          bootstrap_version: { enum: [4, 6] },
          enable_pipeline: { type: "boolean" },
          max_conns: { type: "integer", minimum: 1, maximum: 1024 },
          min_conns: { type: "integer", minimum: 0, maximum: 1024 },
          idle_timeout: durationSchema,
          insecure_skip_verify: { type: "boolean" },
          dial_addr: { type: "string", minLength: 1 },
          port: { type: "integer", minimum: 1, maximum: 65535 },
          ca: { type: "string", minLength: 1 },
          socks5: { type: "string", minLength: 1 },
          outbound: { type: "string", minLength: 1 },
        },
      },
    },
    concurrent: { type: "integer", minimum: 1, maximum: MAX_CONCURRENT, default: 1 },
    short_circuit: { type: "boolean", default: false },
    response_selection: { enum: RESPONSE_SELECTIONS, default: "fastest" },
    outbound: { type: "string", minLength: 1 },
  },
} as const;

function checkUpstream(u: UpstreamArgs, i: number, env: CheckEnv): ArgProblem[] {
  const problems: ArgProblem[] = [];
  const at = (field: string): (string | number)[] => ["upstreams", i, field];
  const attempt = (field: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      problems.push({ path: at(field), message: (err as Error).message });
    }
  };
  let protocol = "";
  attempt("addr", () => {
    protocol = parseUpstreamAddr(u.addr).protocol;
  });
  const encrypted = protocol === "tls" || protocol === "https" || protocol === "";
  for (const field of ["insecure_skip_verify", "ca"] as const) {
    if (u[field] !== undefined && !encrypted) problems.push({ path: at(field), message: `${field} applies to tls:// and https:// upstreams only` });
  }
  if (u.dial_addr !== undefined) attempt("dial_addr", () => parseDialAddr(u.dial_addr as string));
  if (typeof u.bootstrap === "string") attempt("bootstrap", () => parseBootstrap(u.bootstrap as string));
  else if (u.bootstrap !== undefined) {
    u.bootstrap.forEach((b, k) => {
      try {
        parseBootstrap(b);
      } catch (err) {
        problems.push({ path: [...at("bootstrap"), k], message: (err as Error).message });
      }
    });
  }
  if (u.timeout !== undefined) {
    attempt("timeout", () => {
      if (parseDuration(u.timeout as number | string) <= 0) throw new Error("timeout must be greater than zero");
    });
  }
  if (u.idle_timeout !== undefined) attempt("idle_timeout", () => parseDuration(u.idle_timeout as number | string));
  if (u.socks5 !== undefined) attempt("socks5", () => parseSocks5(u.socks5 as string));
  if (u.outbound !== undefined) {
    const why = env.outboundProblem(u.outbound);
    if (why !== null) problems.push({ path: at("outbound"), message: why });
  }
  if (u.min_conns !== undefined && u.min_conns > 0) {
    const max = u.max_conns ?? DEFAULT_MAX_CONNS;
    if (u.min_conns > max) problems.push({ path: at("min_conns"), message: `min_conns (${u.min_conns}) must not exceed max_conns (${max}${u.max_conns === undefined ? ", the default" : ""})` });
    if (protocol === "udp" && u.socks5 === undefined) problems.push({ path: at("min_conns"), message: "min_conns applies to tcp://, tls:// and https:// upstreams (and udp:// ones with their own socks5, which speak TCP)" });
  }
  return problems;
}

export function checkArgs(args: ForwardArgs, env: CheckEnv): ArgProblem[] {
  const problems = args.upstreams.flatMap((u, i) => checkUpstream(u, i, env));
  if (args.outbound !== undefined) {
    const why = env.outboundProblem(args.outbound);
    if (why !== null) problems.push({ path: ["outbound"], message: why });
  }
  const mode = args.response_selection;
  if ((mode === "prefer_positive" || mode === "consensus") && (args.upstreams.length < 2 || args.concurrent < 2)) {
    problems.push({ path: ["response_selection"], message: `${mode} compares the answers of several upstreams: it needs at least two upstreams and concurrent ≥ 2` });
  }
  return problems;
}

/** `forward <addr> [<addr>...] [short_circuit[=true|false]]`. */
export function quickSetupArgs(param: string): Omit<ForwardArgs, "response_selection"> {
  const addrs: string[] = [];
  let shortCircuit = false;
  for (const token of param.split(/[\s,]+/).filter((t) => t.length > 0)) {
    const m = /^short_circuit(?:=(.*))?$/.exec(token);
    if (!m) {
      addrs.push(token);
      continue;
    }
    if (m[1] !== undefined && m[1] !== "true" && m[1] !== "false") throw new ArgError(`'${token}': short_circuit takes true or false`);
    shortCircuit = m[1] !== "false";
  }
  if (addrs.length === 0) throw new ArgError("forward needs at least one upstream address (forward <addr> [<addr>...] [short_circuit])");
  return { upstreams: addrs.map((addr) => ({ addr })), concurrent: addrs.length > 1 ? QUICK_SETUP_CONCURRENT : 1, short_circuit: shortCircuit };
}
