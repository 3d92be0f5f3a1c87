// Plugins whose arguments are nothing but `$provider` references (question, reload_provider):
// parsing the list, and declaring the references as dependencies.

import { ArgError, type DependencySpec } from "../registry/types.js";

export interface ProviderRef {
  tag: string;
  at: (string | number)[];
}

const REF = /^\$([^\s/?#$&]+)$/;

/**
 * The `$provider` tokens of `items` (each split on commas and whitespace). Any other token is an
 * ArgError whose message is `'<token>': <why(token)>`; an empty list is one too.
 */
export function parseProviderRefs(items: string | string[], why: (token: string) => string): ProviderRef[] {
  const list = typeof items === "string" ? [items] : items;
  const out: ProviderRef[] = [];
  list.forEach((item, i) => {
    const at = typeof items === "string" ? [] : [i];
    for (const token of item.split(/[\s,]+/).filter((t) => t.length > 0)) {
      const m = REF.exec(token);
      if (!m) throw new ArgError(`'${token}': ${why(token)}`, at);
      out.push({ tag: m[1], at });
    }
  });
  if (out.length === 0) throw new ArgError("needs at least one $provider");
  return out;
}

/** The references as provider dependencies; none when the list does not parse (check reports that). */
export function providerRefDependencies(parse: () => ProviderRef[]): DependencySpec[] {
  try {
    return parse().map((r) => ({ argsPath: r.at, target: r.tag, kind: "provider" as const }));
  } catch (err) {
    if (err instanceof ArgError) return [];
    throw err;
  }
}
