// `ttl`: rewrites the TTLs of a response (fixed value or min/max bounds), patched in place on the wire.

import { QTYPE } from "../../dns/constants.js";
import { DnsResponse } from "../../dns/response.js";
import { Step } from "../../engine/types.js";
import { ArgError, definePlugin, type ArgProblem } from "../../registry/types.js";

interface TtlArgs {
  fix?: number;
  min?: number;
  max?: number;
}

/** RFC 2181 §8: TTLs are 31-bit; a value with the top bit set is read as 0. */
const MAX_TTL = 0x7fffffff;
const ttlValue = { type: "integer", minimum: 0, maximum: MAX_TTL } as const;

/** `300` → fix; `60-600` → min/max (max 0: no upper bound). */
function parseTtlText(text: string): TtlArgs {
  const t = text.trim();
  if (/^\d+$/.test(t)) return { fix: Number(t) };
  const m = /^(\d+)\s*-\s*(\d+)$/.exec(t);
  if (!m) throw new ArgError(`'${text}' is not a TTL: write '300' (fixed) or '60-600' (min-max, max 0 = no upper bound)`);
  return { min: Number(m[1]), max: Number(m[2]) };
}

/** A compiled rule: the TTL to write for a TTL read from the wire. */
type Adjust = (ttl: number) => number;

function compile(args: TtlArgs): Adjust {
  if (args.fix !== undefined) {
    const fix = args.fix;
    return () => fix;
  }
  const min = args.min ?? 0;
  const max = args.max ?? 0;
  return (raw) => {
    let ttl = raw > MAX_TTL ? 0 : raw;
    if (ttl < min) ttl = min;
    if (max > 0 && ttl > max) ttl = max;
    return ttl;
  };
}

/** A patched copy of the response, or null when no TTL changes. Only the TTL fields are touched. */
export function adjustTtls(resp: DnsResponse, adjust: Adjust): DnsResponse | null {
  const wire = resp.toWire();
  const records = resp.index.records;
  let out: Buffer | null = null;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    if (r.type === QTYPE.OPT) continue;
    const at = r.fixed + 4;
    const ttl = wire.readUInt32BE(at);
    const next = adjust(ttl);
    if (next === ttl) continue;
    // The bytes belong to the current response; change a copy and hand it over whole.
    out ??= Buffer.from(wire);
    out.writeUInt32BE(next, at);
  }
  return out === null ? null : DnsResponse.fromWire(out);
}

function ttlProblems(args: TtlArgs): ArgProblem[] {
  if (args.fix !== undefined) return [];
  if (args.min === undefined && args.max === undefined) return [{ path: [], message: "needs 'fix', or 'min' and/or 'max'" }];
  if (args.min !== undefined && args.max !== undefined && args.max > 0 && args.max < args.min) {
    return [{ path: ["max"], message: `max (${args.max}) is below min (${args.min}); use max 0 for no upper bound` }];
  }
  return [];
}

export const ttl = definePlugin<TtlArgs, "executor">({
  type: "ttl",
  kind: "executor",
  feature: "core",
  summary: "Rewrites response TTLs: a fixed value, or clamped to min/max (answer, authority, additional).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: { fix: ttlValue, min: ttlValue, max: ttlValue },
  },
  shorthand(raw) {
    if (typeof raw === "string") return parseTtlText(raw);
    if (typeof raw === "number") return { fix: raw };
    return raw ?? {};
  },
  quickSetup: (param) => param,
  check: ttlProblems,
  create(args) {
    const adjust = compile(args);
    return {
      execute(ctx) {
        const resp = ctx.response;
        if (resp === null) return Step.Next;
        const patched = adjustTtls(resp, adjust);
        if (patched !== null) ctx.response = patched;
        return Step.Next;
      },
    };
  },
});
