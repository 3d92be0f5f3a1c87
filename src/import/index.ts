// The importers of this build, each loaded only when `sluice import <source>` asks for it.

import type { Importer } from "./types.js";

type ImporterModule = { importConfig: Importer };

/** Source name → the module that reads it. A source that is not here is not in this build. */
export const IMPORTERS: Record<string, () => Promise<ImporterModule>> = {
  adguardhome: () => import("./adguardhome.js"),
  pihole: () => import("./pihole.js"),
  blocky: () => import("./blocky.js"),
  mosdns: () => import("./mosdns.js"),
};
