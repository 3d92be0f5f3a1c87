// Args of qtype / qclass / rcode: a string or list of names and numbers, split on commas and spaces.

import { ArgError, type ArgProblem } from "../../registry/types.js";

export type EnumListArgs = (string | number)[];

export const enumListSchema = { type: "array", minItems: 1, items: { type: ["string", "integer"] } } as const;

/** `"A,AAAA 28"`, `["A", 28]`, `28` → a list of tokens. */
export function enumListShorthand(raw: unknown): unknown {
  if (raw === undefined || raw === null) throw new ArgError("needs at least one value");
  const items = Array.isArray(raw) ? (raw as unknown[]) : [raw];
  return items.flatMap((item) => (typeof item === "string" ? item.split(/[\s,]+/).filter((s) => s.length > 0) : [item]));
}

/** Parses every token, reporting each bad one. */
export function parseEnumList(args: EnumListArgs, parse: (text: string) => number | undefined, what: string, max: number): { values: Set<number>; problems: ArgProblem[] } {
  const values = new Set<number>();
  const problems: ArgProblem[] = [];
  args.forEach((token, i) => {
    const value = typeof token === "number" ? (Number.isInteger(token) && token >= 0 && token <= max ? token : undefined) : parse(token);
    if (value === undefined) problems.push({ path: [i], message: `'${token}' is not a ${what}` });
    else values.add(value);
  });
  return { values, problems };
}
