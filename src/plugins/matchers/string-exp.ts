// `string_exp`: compares a query attribute (name, type, client, marks, answer IPs, an env var) with strings.

import { parseClass, parseRcode, parseType } from "../../dns/constants.js";
import type { DnsContext } from "../../engine/context.js";
import { answerAddressTexts } from "../../engine/template.js";
import { ArgError, argProblems, definePlugin } from "../../registry/types.js";

type StringExpArgs = string | string[];

type Getter = (ctx: DnsContext) => string;
/** Numeric attributes; null when absent (rcode without a response). */
type NumberGetter = (ctx: DnsContext) => number | null;

const OPS = ["eq", "prefix", "suffix", "contains", "regexp", "zl"] as const;
type Op = (typeof OPS)[number];

const SOURCES = "qname, qtype, qclass, rcode, resp_ip, mark, client_ip or $ENV_VAR";

const respIps = (ctx: DnsContext): string => answerAddressTexts(ctx).join(",");

function rcodeOf(ctx: DnsContext): number | null {
  if (ctx.response === null) return null;
  try {
    return ctx.response.rcode;
  } catch {
    return null;
  }
}

const NUMERIC = new Map<string, { get: NumberGetter; parse: (t: string) => number | undefined; what: string }>([
  ["qtype", { get: (c) => c.qtype, parse: parseType, what: "query type" }],
  ["qclass", { get: (c) => c.qclass, parse: parseClass, what: "query class" }],
  ["rcode", { get: rcodeOf, parse: parseRcode, what: "rcode" }],
]);

const TEXT = new Map<string, Getter>([
  ["qname", (c) => c.qname],
  ["client_ip", (c) => c.clientIp],
  ["resp_ip", respIps],
  ["mark", (c) => (c.marks === null ? "" : c.marks.slice().sort((a, b) => a - b).join(","))],
]);

/** A string test compiled from the op and its arguments. */
function stringTest(op: Op, args: string[]): (value: string) => boolean {
  switch (op) {
    case "eq":
      return args.length === 1 ? (v) => v === args[0] : (v) => args.includes(v);
    case "prefix":
      return (v) => args.some((a) => v.startsWith(a));
    case "suffix":
      return (v) => args.some((a) => v.endsWith(a));
    case "contains":
      return (v) => args.some((a) => v.includes(a));
    case "regexp": {
      const res = args.map((a) => {
        try {
          return new RegExp(a);
        } catch (err) {
          throw new ArgError(`'${a}' is not a valid regular expression: ${(err as Error).message}`);
        }
      });
      return (v) => res.some((re) => re.test(v));
    }
    case "zl":
      return (v) => v.length === 0;
  }
}

/** Parses and compiles the expression into a predicate; everything costly happens here, once. */
function compile(args: StringExpArgs): (ctx: DnsContext) => boolean {
  const text = typeof args === "string" ? args : args.join(" ");
  const tokens = text.split(/\s+/).filter((t) => t.length > 0);
  if (tokens.length < 2) throw new ArgError(`expects '<source> <op> [args...]' with source ${SOURCES}`);
  const [source, opText, ...rest] = tokens;
  const op = opText.toLowerCase() as Op;
  if (!OPS.includes(op)) throw new ArgError(`unknown op '${opText}' (use eq, prefix, suffix, contains, regexp or zl)`);
  if (op === "zl" && rest.length > 0) throw new ArgError("op 'zl' takes no arguments");
  if (op !== "zl" && rest.length === 0) throw new ArgError(`op '${op}' needs at least one argument`);

  if (source.startsWith("$")) {
    const name = source.slice(1);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ArgError(`'${source}' is not an environment variable reference`);
    // Read once: the result cannot change while this runtime lives.
    const result = stringTest(op, rest)(process.env[name] ?? "");
    return () => result;
  }
  const numeric = NUMERIC.get(source);
  if (numeric !== undefined) {
    if (op === "eq") {
      // Mnemonics are accepted here (`qtype eq AAAA`); the value itself is the number.
      const wanted = new Set<number>();
      for (const a of rest) {
        const n = numeric.parse(a);
        if (n === undefined) throw new ArgError(`'${a}' is not a ${numeric.what}`);
        wanted.add(n);
      }
      const get = numeric.get;
      return (ctx) => {
        const v = get(ctx);
        return v !== null && wanted.has(v);
      };
    }
    const test = stringTest(op, rest);
    const get = numeric.get;
    return (ctx) => {
      const v = get(ctx);
      return test(v === null ? "" : String(v));
    };
  }
  const get = TEXT.get(source);
  if (get === undefined) {
    const why = source === "server_name" || source === "url_path" ? " (Sluice has no DoT/DoH server to supply it)" : "";
    throw new ArgError(`unknown source '${source}'${why}; use ${SOURCES}`);
  }
  // Names are compared lower-case, as the query name is.
  const test = stringTest(op, source === "qname" && op !== "regexp" ? rest.map((a) => a.toLowerCase()) : rest);
  return (ctx) => test(get(ctx));
}

export const stringExpMatcher = definePlugin<StringExpArgs, "matcher">({
  type: "string_exp",
  kind: "matcher",
  feature: "core",
  summary: "Compares a query attribute (qname, qtype, rcode, client_ip, marks, answer IPs, $ENV) using eq/prefix/suffix/contains/regexp/zl.",
  schema: { type: ["string", "array"], minLength: 1, minItems: 1, items: { type: "string" } },
  quickSetup: (param) => param,
  check: (args) => argProblems(() => compile(args)),
  create(args) {
    return { match: compile(args) };
  },
});
