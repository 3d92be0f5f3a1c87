// A catalog of plugin types filtered by the build. This program's catalog, with every plugin type it
// knows, is made by src/plugins/catalog.ts (the registry knows no plugin).

import type { BuildSelection } from "./bundles.js";
import type { AnyDefinition, PluginKind } from "./types.js";

export type Lookup = { def: AnyDefinition } | { error: string };

export class Catalog {
  private readonly all = new Map<string, AnyDefinition>();
  readonly build: BuildSelection;

  constructor(definitions: readonly AnyDefinition[], build: BuildSelection) {
    this.build = build;
    for (const d of definitions) {
      if (this.all.has(d.type)) throw new Error(`plugin type '${d.type}' registered twice`);
      this.all.set(d.type, d);
    }
  }

  private enabled(def: AnyDefinition): boolean {
    return this.build.enabledFeatures.includes(def.feature);
  }

  lookup(type: string): Lookup {
    const def = this.all.get(type);
    if (!def) return { error: `unknown plugin type '${type}'` };
    if (!this.enabled(def)) {
      return { error: `plugin type '${type}' is not included in this build (bundle '${this.build.bundle}'; it needs feature '${def.feature}')` };
    }
    return { def };
  }

  /** Types compiled into this build, per kind, sorted. */
  supported(): Record<`${PluginKind}s`, string[]> {
    const out = { servers: [] as string[], executors: [] as string[], matchers: [] as string[], providers: [] as string[] };
    for (const d of this.all.values()) if (this.enabled(d)) out[`${d.kind}s`].push(d.type);
    for (const list of Object.values(out)) list.sort();
    return out;
  }

  definitions(): AnyDefinition[] {
    return [...this.all.values()].filter((d) => this.enabled(d));
  }
}
