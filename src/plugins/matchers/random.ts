// `random`: true with a given probability (a Bernoulli draw per query).

import { ArgError, definePlugin } from "../../registry/types.js";

interface RandomArgs {
  probability: number;
}

const DECIMAL = /^(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;

/** `0.05`, `"0.05"`, `["0.05"]` or `{probability}`. */
function shorthand(raw: unknown): unknown {
  let value = raw;
  if (Array.isArray(raw)) {
    if (raw.length !== 1) throw new ArgError("expects exactly one probability");
    value = raw[0];
  }
  if (typeof value === "number") return { probability: value };
  if (typeof value === "string") {
    const text = value.trim();
    if (!DECIMAL.test(text)) throw new ArgError(`'${value}' is not a probability (a number from 0 to 1)`);
    return { probability: Number(text) };
  }
  if (value === null || value === undefined) throw new ArgError("needs a probability from 0 to 1");
  return value;
}

export const randomMatcher = definePlugin<RandomArgs, "matcher">({
  type: "random",
  kind: "matcher",
  feature: "core",
  summary: "Matches a random share of queries (probability from 0 to 1).",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["probability"],
    properties: { probability: { type: "number", minimum: 0, maximum: 1 } },
  },
  shorthand,
  quickSetup: (param) => param,
  create(args) {
    const p = args.probability;
    if (p === 0) return { match: () => false };
    if (p === 1) return { match: () => true };
    return { match: () => Math.random() < p };
  },
});
