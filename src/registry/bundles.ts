// Build bundles: which features (and so which plugin types) a build includes.
// The bundle is chosen when the program is built (SLUICE_BUNDLE at `npm run build`, recorded in
// build-info.json next to the compiled code) and can be narrowed at start with SLUICE_BUNDLE.

export const BUNDLES = {
  minimal: ["core"],
  standard: ["core", "cache", "metrics", "api", "webui"],
  full: ["core", "cache", "metrics", "api", "webui", "query-recorder", "cron", "download", "upgrade", "webhook", "script", "ipset", "mikrotik"],
} as const;

export type BundleName = keyof typeof BUNDLES | "custom";

export interface BuildSelection {
  bundle: BundleName;
  /** Bundles whose features are all enabled (a full build lists both standard and full). */
  enabledBundles: string[];
  /** Public feature names; internal ones start with `_` and are never listed. */
  enabledFeatures: string[];
}

/** Resolves a bundle name, or a comma-separated feature list (a custom build). */
export function selectBuild(spec: string | undefined): BuildSelection {
  const name = (spec ?? "full").trim() || "full";
  const features: readonly string[] =
    name in BUNDLES ? BUNDLES[name as keyof typeof BUNDLES] : ["core", ...name.split(",").map((s) => s.trim()).filter((s) => s.length > 0)];
  const set = new Set(features);
  const enabledBundles = Object.entries(BUNDLES)
    .filter(([, list]) => list.every((f) => set.has(f)))
    .map(([b]) => b);
  return {
    bundle: name in BUNDLES ? (name as BundleName) : "custom",
    enabledBundles,
    enabledFeatures: [...set].filter((f) => !f.startsWith("_")).sort(),
  };
}
