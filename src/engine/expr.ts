// Parsing of the expressions written inside `sequence` rules and `any_match`:
//   matcher: [!] $tag | [!] type param
//   exec:    accept | return | reject [rcode|nodata] [soa] [ttl=N] | mark n[,n...] | jump seq | goto seq | $tag | type param

import { parseRcode, RCODE } from "../dns/constants.js";
import { DEFAULT_NEGATIVE_TTL, MAX_TTL } from "../dns/negative.js";
import { ArgError, type CheckEnv, type DependencySpec, type ArgProblem } from "./plugin-args.js";

export type MatchExpr = { negate: boolean; raw: string } & ({ ref: string } | { quick: string });

export type ExecExpr =
  | { builtin: "accept" }
  | { builtin: "return" }
  /** `soaTtl`: the negative answers (NXDOMAIN, `nodata`) carry a synthesised SOA with this TTL; null: none. */
  | { builtin: "reject"; rcode: number; soaTtl: number | null }
  | { builtin: "mark"; marks: number[] }
  | { builtin: "jump" | "goto"; target: string }
  | { ref: string }
  | { quick: string };

const TAG = /^[^\s/?#$]+$/;

export function parseMatchExpr(text: string, path: (string | number)[]): MatchExpr {
  let t = text.trim();
  let negate = false;
  if (t.startsWith("!")) {
    negate = true;
    t = t.slice(1).trim();
  }
  if (t.length === 0) throw new ArgError("empty matcher expression", path);
  if (t.startsWith("$")) {
    const ref = t.slice(1).trim();
    if (!TAG.test(ref)) throw new ArgError(`'${text}' is not a valid $tag reference`, path);
    return { negate, raw: text, ref };
  }
  return { negate, raw: text, quick: t };
}

function parseU32List(text: string, path: (string | number)[]): number[] {
  const parts = text.split(/[\s,]+/).filter((s) => s.length > 0);
  if (parts.length === 0) throw new ArgError("mark needs at least one number", path);
  return parts.map((p) => {
    if (!/^\d+$/.test(p) || Number(p) > 0xffffffff) throw new ArgError(`mark '${p}' is not an unsigned 32-bit integer`, path);
    return Number(p);
  });
}

/**
 * `reject [rcode|nodata] [soa] [ttl=N]`: REFUSED by default. NXDOMAIN (by name or number) and `nodata`
 * (NOERROR, empty answer) carry an SOA so clients cache the negative answer, TTL N seconds (300 by
 * default); `reject 0 soa` (OxiDNS's spelling) is `reject nodata`.
 */
function parseReject(rest: string, path: (string | number)[]): ExecExpr {
  const words = rest.split(/\s+/).filter((w) => w.length > 0);
  if (words.length === 0) return { builtin: "reject", rcode: RCODE.REFUSED, soaTtl: null };
  const [what, ...options] = words;
  const nodata = what.toLowerCase() === "nodata";
  const rcode = nodata ? RCODE.NOERROR : parseRcode(what);
  if (rcode === undefined) throw new ArgError(`'${what}' is not an rcode (use a number, a name such as NXDOMAIN, or nodata)`, path);
  let soa = nodata || rcode === RCODE.NXDOMAIN;
  let ttl: number | null = null;
  let soaWord = false;
  for (const word of options) {
    const m = /^ttl=(.*)$/.exec(word);
    if (word.toLowerCase() === "soa" && !soaWord) {
      if (rcode !== RCODE.NOERROR && rcode !== RCODE.NXDOMAIN) throw new ArgError(`'soa' goes with a negative answer: 'reject 0 soa', 'reject nodata' or 'reject nxdomain'`, path);
      soa = soaWord = true;
    } else if (m && ttl === null) {
      if (!/^\d{1,10}$/.test(m[1])) throw new ArgError(`'${word}' is not a TTL: write 'reject ${what} ttl=<seconds>'`, path);
      if (Number(m[1]) > MAX_TTL) throw new ArgError(`${word} is above the largest TTL, ${MAX_TTL}`, path);
      ttl = Number(m[1]);
    } else {
      throw new ArgError(`'${word}' is not part of reject: write 'reject [rcode|nodata] [soa] [ttl=<seconds>]'`, path);
    }
  }
  if (ttl !== null && !soa) throw new ArgError(`ttl= sets the SOA of a negative answer: only 'reject nxdomain' and 'reject nodata' take it`, path);
  return { builtin: "reject", rcode, soaTtl: soa ? (ttl ?? DEFAULT_NEGATIVE_TTL) : null };
}

export function parseExecExpr(text: string, path: (string | number)[]): ExecExpr {
  const t = text.trim();
  if (t.length === 0) throw new ArgError("empty exec expression", path);
  const space = t.search(/\s/);
  const word = space < 0 ? t : t.slice(0, space);
  const rest = space < 0 ? "" : t.slice(space + 1).trim();
  switch (word) {
    case "accept":
    case "return":
      if (rest) throw new ArgError(`'${word}' takes no argument`, path);
      return { builtin: word };
    case "reject":
      return parseReject(rest, path);
    case "mark":
      return { builtin: "mark", marks: parseU32List(rest, path) };
    case "jump":
    case "goto": {
      const target = rest.startsWith("$") ? rest.slice(1).trim() : rest;
      if (!TAG.test(target)) throw new ArgError(`'${word}' needs the tag of a sequence`, path);
      return { builtin: word, target };
    }
  }
  if (t.startsWith("$")) {
    const ref = t.slice(1).trim();
    if (!TAG.test(ref)) throw new ArgError(`'${text}' is not a valid $tag reference`, path);
    return { ref };
  }
  return { quick: t };
}

/** Dependencies and problems of one matcher expression (quick setups checked through `env`). */
export function matchExprDeps(e: MatchExpr, path: (string | number)[], env: CheckEnv): { deps: DependencySpec[]; problems: ArgProblem[] } {
  if ("ref" in e) return { deps: [{ argsPath: path, target: e.ref, kind: "matcher" }], problems: [] };
  return env.quickSetup("matcher", e.quick, path);
}

export function execExprDeps(e: ExecExpr, path: (string | number)[], env: CheckEnv): { deps: DependencySpec[]; problems: ArgProblem[] } {
  if ("ref" in e) return { deps: [{ argsPath: path, target: e.ref, kind: "executor" }], problems: [] };
  if ("quick" in e) return env.quickSetup("executor", e.quick, path);
  if (e.builtin === "jump" || e.builtin === "goto") {
    return { deps: [{ argsPath: path, target: e.target, kind: "executor", pluginType: "sequence" }], problems: [] };
  }
  return { deps: [], problems: [] };
}
