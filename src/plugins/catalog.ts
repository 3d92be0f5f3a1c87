// This program's catalog: every plugin type it knows (./index.ts), filtered by the build.

import { selectBuild, type BuildSelection } from "../registry/bundles.js";
import { Catalog } from "../registry/catalog.js";
import { PLUGIN_DEFINITIONS } from "./index.js";

/** The catalog of the bundle this process runs (SLUICE_BUNDLE, else the full build). */
export function createCatalog(bundle: string | undefined = process.env.SLUICE_BUNDLE): Catalog {
  return catalogOf(selectBuild(bundle));
}

/** The catalog of a build selected elsewhere (a validation worker judges as its main thread does). */
export function catalogOf(build: BuildSelection): Catalog {
  return new Catalog(PLUGIN_DEFINITIONS, build);
}
