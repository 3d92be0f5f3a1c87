// YAML alias bombs (anchors aliased into exponentially large documents). The yaml library refuses
// them while converting to JS ("Excessive alias count"), without saying where; this finds the alias
// it stopped at, by the same count, so the diagnostic has a line and column.

import { isAlias, isCollection, isPair, visit, type Alias, type Document, type Node as YamlNode } from "yaml";

/** The yaml library's own default: an anchor's content may be repeated through aliases about this many times. */
export const MAX_ALIAS_COUNT = 100;

/** True for the error the yaml library throws when alias expansion passes maxAliasCount. */
export function isAliasLimitError(err: unknown): boolean {
  return err instanceof Error && /Excessive alias count/.test(err.message);
}

interface AnchorUse {
  count: number;
  aliasCount: number;
}

/**
 * The alias at which conversion stops, found as the yaml library counts: every anchored node is
 * seen once plus once per alias to it, weighted by the alias uses inside it.
 */
export function excessiveAlias(doc: Document, max = MAX_ALIAS_COUNT): Alias | null {
  const anchors = new Map<string, YamlNode>();
  const uses = new Map<YamlNode, AnchorUse>();
  const sources = new Map<Alias, YamlNode>();
  const weight = (node: unknown): number => {
    if (isAlias(node)) {
      const source = sources.get(node);
      const use = source ? uses.get(source) : undefined;
      return use ? use.count * use.aliasCount : 0;
    }
    if (isCollection(node)) {
      let most = 0;
      for (const item of node.items) most = Math.max(most, weight(item));
      return most;
    }
    if (isPair(node)) return Math.max(weight(node.key), weight(node.value));
    return 1;
  };
  let found: Alias | null = null;
  visit(doc, {
    Node: (_key, node) => {
      if (isAlias(node)) {
        const source = anchors.get(node.source);
        const use = source ? uses.get(source) : undefined;
        if (!source || !use) return undefined;
        sources.set(node, source);
        use.count += 1;
        if (use.aliasCount === 0) use.aliasCount = weight(source);
        if (use.count * use.aliasCount > max) {
          found = node;
          return visit.BREAK;
        }
      } else if (node.anchor) {
        anchors.set(node.anchor, node);
        uses.set(node, { count: 1, aliasCount: 0 });
      }
      return undefined;
    },
  });
  return found;
}
