// `forward_edns0opt`: copies chosen EDNS options of the request into the response when the response lacks them.

import { EDNS_DO, EDNS_OPTION } from "../../dns/constants.js";
import type { EdnsOption } from "../../dns/message.js";
import type { DnsContext } from "../../engine/context.js";
import { isPromise, runNext, type Step } from "../../engine/types.js";
import { ArgError, definePlugin } from "../../registry/types.js";
import { responseOptionCodes } from "./edns-options.js";

interface Edns0OptArgs {
  codes: number[];
}

/** UDP size announced in an OPT record we add to a response that had none. */
const ADDED_EDNS_UDP_SIZE = 1232;

const OPTION_NAMES = new Map(Object.entries(EDNS_OPTION).map(([name, code]) => [name.toLowerCase().replace(/_/g, "-"), code]));

/** A code as a number (0-65535) or an option name (`cookie`, `padding`, `nsid`, `tcp-keepalive`, ...). */
function parseCode(token: string | number, at: (string | number)[]): number {
  if (typeof token === "number") return token;
  const t = token.trim().toLowerCase();
  if (/^\d{1,5}$/.test(t) && Number(t) <= 0xffff) return Number(t);
  const named = OPTION_NAMES.get(t.replace(/_/g, "-"));
  if (named === undefined) throw new ArgError(`'${token}' is not an EDNS option code (0-65535) or name (${[...OPTION_NAMES.keys()].join(", ")})`, at);
  return named;
}

function parseCodeList(text: string, at: (string | number)[]): number[] {
  return text
    .split(/[\s,]+/)
    .filter((t) => t.length > 0)
    .map((t) => parseCode(t, at));
}

/** Codes given as a string, or a list mixing numbers and names; anything else is left to the schema. */
function normaliseCodes(value: unknown, at: (string | number)[]): unknown {
  if (typeof value === "string") return parseCodeList(value, at);
  if (!Array.isArray(value)) return value;
  return value.map((c: unknown, i) => (typeof c === "string" ? parseCode(c, [...at, i]) : c));
}

/** Accepts `{codes}`, a list, or a string of codes (numbers or names) separated by commas or spaces. */
function shorthand(raw: unknown): unknown {
  if (raw === null || raw === undefined) return { codes: [] };
  if (typeof raw === "string" || Array.isArray(raw)) return { codes: normaliseCodes(raw, []) };
  if (typeof raw !== "object") return raw;
  const obj = raw as Record<string, unknown>;
  return "codes" in obj ? { ...obj, codes: normaliseCodes(obj.codes, ["codes"]) } : obj;
}

/** Adds the remembered options whose codes the response lacks; adds an OPT record when it has none. */
function copyInto(dns: DnsContext, remembered: readonly EdnsOption[], requestFlags: number, step: Step): Step {
  const resp = dns.response;
  if (resp === null) return step;
  const present = responseOptionCodes(resp);
  const missing = present === null ? remembered : remembered.filter((o) => !present.includes(o.code));
  if (missing.length === 0) return step;
  const m = resp.edit();
  const edns = (m.edns ??= { udpSize: ADDED_EDNS_UDP_SIZE, extRcode: 0, version: 0, flags: requestFlags & EDNS_DO, options: [] });
  edns.options = [...edns.options, ...missing];
  return step;
}

export const forwardEdns0opt = definePlugin<Edns0OptArgs, "executor">({
  type: "forward_edns0opt",
  kind: "executor",
  feature: "core",
  summary: "Copies the listed EDNS options of the request into the response when the response lacks them.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["codes"],
    properties: {
      codes: { type: "array", items: { type: "integer", minimum: 0, maximum: 65535 } },
    },
  },
  shorthand,
  quickSetup: (param) => param,
  // The reference accepts an empty list as a no-op; here it is almost certainly a mistake.
  check: (args) => (args.codes.length === 0 ? [{ path: ["codes"], message: "needs at least one EDNS option code" }] : []),
  create(args) {
    const codes = new Set(args.codes);
    return {
      continuation: true,
      execute(dns, next) {
        const edns = dns.query.edns;
        if (codes.size === 0 || edns === null) return runNext(dns, next);
        // Remembered before the rest runs: later rules may change the request's options.
        let remembered: EdnsOption[] | null = null;
        for (const o of edns.options) if (codes.has(o.code)) (remembered ??= []).push(o);
        if (remembered === null) return runNext(dns, next);
        const keep = remembered;
        const flags = edns.flags;
        const r = runNext(dns, next);
        return isPromise(r) ? r.then((step) => copyInto(dns, keep, flags, step)) : copyInto(dns, keep, flags, r);
      },
    };
  },
});
