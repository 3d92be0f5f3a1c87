// Args shared by `geosite` and `geoip`: one data file and the list codes to take from it.

import { readFile } from "node:fs/promises";
import { ArgError, type ArgProblem } from "../../../registry/types.js";
import type { Selection } from "./dat.js";

export interface GeoArgs {
  file: string;
  /** Case-insensitive list codes (`cn`, `category-ads-all`; geosite also `code@attr`); empty: every list. */
  selectors: string[];
}

export const geoSchema = {
  type: "object",
  additionalProperties: false,
  required: ["file"],
  properties: {
    file: { type: "string", minLength: 1 },
    selectors: { type: "array", items: { type: "string" }, default: [] },
  },
} as const;

const CODE = /^[^\s@]+$/;

/** Selector syntax problems; `attrs` allows `code@attr[@attr...]` (geosite). */
export function selectorProblems(selectors: readonly string[], attrs: boolean): ArgProblem[] {
  const problems: ArgProblem[] = [];
  selectors.forEach((s, i) => {
    const parts = s.split("@");
    if (!parts.every((p) => CODE.test(p)) || (!attrs && parts.length > 1)) {
      problems.push({ path: ["selectors", i], message: `'${s}' is not a list code${attrs ? " (code, or code@attribute)" : ""}` });
    }
  });
  return problems;
}

/** geosite selectors → code (upper case) → attribute filters (lower case); null: every list. */
export function siteSelection(selectors: readonly string[]): Selection {
  if (selectors.length === 0) return null;
  const out = new Map<string, string[][]>();
  for (const s of selectors) {
    const [code, ...attrs] = s.split("@");
    const key = code.toUpperCase();
    const filters = out.get(key) ?? [];
    filters.push(attrs.map((a) => a.toLowerCase()));
    out.set(key, filters);
  }
  return out;
}

/** geoip selectors → upper-case codes; null: every list. */
export function ipSelection(selectors: readonly string[]): Set<string> | null {
  return selectors.length === 0 ? null : new Set(selectors.map((s) => s.toUpperCase()));
}

/** Reads the data file whole (these files are a few MB); an unreadable file is an ArgError at `file`. */
export async function readGeoFile(path: string, shown: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new ArgError(`cannot read '${shown}': ${(err as Error).message}`, ["file"]);
  }
}

/** Selected codes the file does not have → an ArgError naming them (and, briefly, what it has). */
export function requireCodes(shown: string, wanted: Iterable<string> | null, found: ReadonlySet<string>, available: () => string[]): void {
  if (wanted === null) return;
  const missing = [...wanted].filter((c) => !found.has(c));
  if (missing.length === 0) return;
  const have = available();
  const sample = have.slice(0, 20).map((c) => c.toLowerCase()).join(", ");
  throw new ArgError(
    `'${shown}' has no list ${missing.map((c) => `'${c.toLowerCase()}'`).join(", ")} (it has ${have.length}: ${sample}${have.length > 20 ? ", ..." : ""})`,
    ["selectors"],
  );
}
