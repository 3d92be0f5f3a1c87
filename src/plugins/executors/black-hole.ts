// `black_hole`: answers A/AAAA queries with fixed (sinkhole) addresses, TTL 300.

import { QTYPE, RCODE } from "../../dns/constants.js";
import { parseIP } from "../../dns/ip.js";
import { recordBlock } from "../../dns/reply.js";
import { Step } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin } from "../../registry/types.js";

interface BlackHoleArgs {
  ips: string[];
  short_circuit: boolean;
}

const SINKHOLE_TTL = 300;

function splitIps(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s.length > 0);
}

function parseIps(args: BlackHoleArgs): { v4: Uint8Array[]; v6: Uint8Array[] } {
  const v4: Uint8Array[] = [];
  const v6: Uint8Array[] = [];
  args.ips.forEach((text, i) => {
    const ip = parseIP(text);
    if (!ip) throw new ArgError(`'${text}' is not an IP address`, ["ips", i]);
    (ip.length === 4 ? v4 : v6).push(ip);
  });
  if (v4.length + v6.length === 0) throw new ArgError("needs at least one IP address", ["ips"]);
  return { v4, v6 };
}

export const blackHole = definePlugin<BlackHoleArgs, "executor">({
  type: "black_hole",
  kind: "executor",
  feature: "core",
  summary: "Answers A/AAAA queries with fixed addresses (sinkhole).",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["ips"],
    properties: { ips: { type: "array", minItems: 1, items: { type: "string" } }, short_circuit: { type: "boolean", default: false } },
  },
  // "0.0.0.0 ::" or ["0.0.0.0", "::"] are the address list alone.
  shorthand(raw) {
    if (typeof raw === "string") return { ips: splitIps(raw) };
    if (Array.isArray(raw)) return { ips: raw.flatMap((x) => (typeof x === "string" ? splitIps(x) : [x as string])) };
    if (raw && typeof raw === "object" && typeof (raw as { ips?: unknown }).ips === "string") {
      return { ...(raw), ips: splitIps((raw as { ips: string }).ips) };
    }
    return raw;
  },
  quickSetup(param) {
    const tokens = splitIps(param);
    let shortCircuit = false;
    const ips = tokens.filter((t) => {
      const m = /^short_circuit(?:=(true|false))?$/.exec(t);
      if (!m) return true;
      shortCircuit = m[1] !== "false";
      return false;
    });
    return { ips, short_circuit: shortCircuit };
  },
  check: (args) => argProblems(() => parseIps(args)),
  create(args, ctx) {
    const { v4, v6 } = parseIps(args);
    const v4Block = recordBlock(v4.map((data) => ({ type: QTYPE.A, ttl: SINKHOLE_TTL, data })));
    const v6Block = recordBlock(v6.map((data) => ({ type: QTYPE.AAAA, ttl: SINKHOLE_TTL, data })));
    const hit = ctx.services.metrics.counter("blackhole_block_total", "Answers synthesized by black_hole", ["plugin_tag"])({ plugin_tag: ctx.tag });
    const done = args.short_circuit ? Step.Stop : Step.Next;
    return {
      execute(dnsCtx) {
        const q = dnsCtx.query.questions[0];
        if (!q || q.class !== 1) return Step.Next;
        const block = q.type === QTYPE.A ? v4Block : q.type === QTYPE.AAAA ? v6Block : null;
        if (block === null || block.count === 0) return Step.Next;
        dnsCtx.reply(RCODE.NOERROR, block);
        hit.value++;
        return done;
      },
    };
  },
});
