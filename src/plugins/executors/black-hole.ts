// `black_hole`: answers every query type locally, by `mode`: NXDOMAIN or NODATA (with a synthesised
// SOA so clients cache them), null addresses (0.0.0.0 / ::), the configured addresses (`custom`),
// REFUSED or SERVFAIL. Every reply is prepared when the plugin is created; a query picks one.

import { QTYPE, RCODE } from "../../dns/constants.js";
import { parseIP } from "../../dns/ip.js";
import { DEFAULT_NEGATIVE_TTL, MAX_TTL, negativeSoaBlock } from "../../dns/negative.js";
import { EMPTY_BLOCK, recordBlock, type RecordBlock } from "../../dns/reply.js";
import { Step } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin } from "../../registry/types.js";

const MODES = ["nxdomain", "nodata", "null", "custom", "refused", "servfail"] as const;
type Mode = (typeof MODES)[number];

interface BlackHoleArgs {
  mode?: Mode;
  ips: string[];
  ttl: number;
  short_circuit: boolean;
}

/** One prepared reply: rcode, answer and authority blocks. */
interface Prepared {
  rcode: number;
  answers: RecordBlock;
  authority: RecordBlock;
}

const isMode = (word: string): word is Mode => (MODES as readonly string[]).includes(word);

function splitTokens(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s.length > 0);
}

/**
 * `[mode] [ip ...] [ttl=N] [short_circuit[=bool]]` (the quick setup, and `args` as a string or a list of
 * strings). Anything that is none of these lands in `ips`, where `check` names it.
 */
function parseTokens(tokens: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const ips: string[] = [];
  for (const t of tokens) {
    const sc = /^short_circuit(?:=(true|false))?$/.exec(t);
    const ttl = /^ttl=(.*)$/.exec(t);
    if (sc) out.short_circuit = sc[1] !== "false";
    else if (ttl) out.ttl = /^\d{1,10}$/.test(ttl[1]) ? Number(ttl[1]) : ttl[1];
    else if (out.mode === undefined && isMode(t.toLowerCase())) out.mode = t.toLowerCase();
    else ips.push(t);
  }
  if (ips.length > 0) out.ips = ips;
  return out;
}

function effectiveMode(args: BlackHoleArgs): Mode {
  return args.mode ?? (args.ips.length > 0 ? "custom" : "nxdomain");
}

function parseIps(args: BlackHoleArgs): { v4: Uint8Array[]; v6: Uint8Array[] } {
  const mode = effectiveMode(args);
  if (mode !== "custom" && args.ips.length > 0) {
    throw new ArgError(`addresses are only used by mode 'custom' (mode is '${mode}')`, ["ips"]);
  }
  const v4: Uint8Array[] = [];
  const v6: Uint8Array[] = [];
  args.ips.forEach((text, i) => {
    const ip = parseIP(text);
    if (!ip) {
      const what = /^[a-z_]+$/i.test(text) ? `neither an IP address nor a mode (${MODES.join(", ")})` : "not an IP address";
      throw new ArgError(`'${text}' is ${what}`, ["ips", i]);
    }
    (ip.length === 4 ? v4 : v6).push(ip);
  });
  if (mode === "custom" && v4.length + v6.length === 0) throw new ArgError("mode 'custom' needs at least one IP address in 'ips'", ["ips"]);
  return { v4, v6 };
}

/** The replies of a mode: for A, for AAAA, and for every other type (null: pass through). */
function prepare(args: BlackHoleArgs): { a: Prepared; aaaa: Prepared; other: Prepared } {
  const ttl = args.ttl;
  const soa = negativeSoaBlock(ttl);
  const nodata: Prepared = { rcode: RCODE.NOERROR, answers: EMPTY_BLOCK, authority: soa };
  const same = (p: Prepared): { a: Prepared; aaaa: Prepared; other: Prepared } => ({ a: p, aaaa: p, other: p });
  const addresses = (v4: Uint8Array[], v6: Uint8Array[]): { a: Prepared; aaaa: Prepared; other: Prepared } => {
    const answer = (ips: Uint8Array[], type: number): Prepared =>
      ips.length === 0 ? nodata : { rcode: RCODE.NOERROR, answers: recordBlock(ips.map((data) => ({ type, ttl, data }))), authority: EMPTY_BLOCK };
    return { a: answer(v4, QTYPE.A), aaaa: answer(v6, QTYPE.AAAA), other: nodata };
  };
  switch (effectiveMode(args)) {
    case "nxdomain":
      return same({ rcode: RCODE.NXDOMAIN, answers: EMPTY_BLOCK, authority: soa });
    case "nodata":
      return same(nodata);
    case "refused":
      return same({ rcode: RCODE.REFUSED, answers: EMPTY_BLOCK, authority: EMPTY_BLOCK });
    case "servfail":
      return same({ rcode: RCODE.SERVFAIL, answers: EMPTY_BLOCK, authority: EMPTY_BLOCK });
    case "null":
      return addresses([new Uint8Array(4)], [new Uint8Array(16)]);
    case "custom": {
      const { v4, v6 } = parseIps(args);
      return addresses(v4, v6);
    }
  }
}

export const blackHole = definePlugin<BlackHoleArgs, "executor">({
  type: "black_hole",
  kind: "executor",
  feature: "core",
  summary: "Answers every query locally: NXDOMAIN, NODATA, null or given addresses, REFUSED or SERVFAIL (sinkhole).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      mode: { type: "string", enum: [...MODES] },
      ips: { type: "array", items: { type: "string" }, default: [] },
      ttl: { type: "integer", minimum: 0, maximum: MAX_TTL, default: DEFAULT_NEGATIVE_TTL },
      short_circuit: { type: "boolean", default: false },
    },
  },
  // "nxdomain", "0.0.0.0 ::" or ["0.0.0.0", "::"] read like the quick setup; `ips` may be one string.
  shorthand(raw) {
    if (raw === null || raw === undefined) return {};
    if (typeof raw === "string") return parseTokens(splitTokens(raw));
    if (Array.isArray(raw)) return raw.every((x) => typeof x === "string") ? parseTokens(raw.flatMap(splitTokens)) : { ips: raw };
    if (typeof raw === "object" && typeof (raw as { ips?: unknown }).ips === "string") {
      return { ...raw, ips: splitTokens((raw as { ips: string }).ips) };
    }
    return raw;
  },
  quickSetup: (param) => parseTokens(splitTokens(param)),
  check: (args) => argProblems(() => parseIps(args)),
  create(args, ctx) {
    const replies = prepare(args);
    const hit = ctx.services.metrics.counter("blackhole_block_total", "Answers synthesized by black_hole", ["plugin_tag"])({ plugin_tag: ctx.tag });
    const done = args.short_circuit ? Step.Stop : Step.Next;
    return {
      execute(dnsCtx) {
        const q = dnsCtx.query.questions[0];
        if (!q || q.class !== 1) return Step.Next;
        const r = q.type === QTYPE.A ? replies.a : q.type === QTYPE.AAAA ? replies.aaaa : replies.other;
        dnsCtx.reply(r.rcode, r.answers, r.authority);
        hit.value++;
        return done;
      },
    };
  },
});
