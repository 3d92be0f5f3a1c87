// Static analysis of a configuration against the catalog, without creating any plugin:
// tags, types, args (shorthand → schema → semantic checks), dependencies, cycles, init order and
// which providers are reachable. Every problem is collected and reported together.

import { validateSchema } from "../config/ajv.js";
import { ConfigError, renderPath, type Diagnostic } from "../config/diagnostics.js";
import { unknownOutbound } from "../config/network.js";
import type { PluginConfig, SluiceConfig } from "../config/load.js";
import { callDepthProblems } from "./call-depth.js";
import type { Catalog } from "./catalog.js";
import type { DeclaredNames } from "../engine/plugin-args.js";
import { ArgError, type AnyDefinition, type ArgProblem, type CheckEnv, type DependencySpec, type PluginKind } from "./types.js";

export interface ResolvedPlugin {
  config: PluginConfig;
  def: AnyDefinition;
  /** Args after shorthand, schema defaults and checks. */
  args: unknown;
  deps: DependencySpec[];
}

export interface GraphReport {
  nodes: { tag: string; type: string; kind: PluginKind }[];
  edges: { from: string; field: string; to: string; kind: PluginKind; plugin_type: string | null }[];
  init_order: string[];
}

export interface Analysis {
  /** In configuration order. */
  plugins: ResolvedPlugin[];
  byTag: Map<string, ResolvedPlugin>;
  /** Dependencies first; only live plugins. */
  initOrder: string[];
  /** Providers no live plugin reaches; they are not created. */
  skipped: string[];
  graph: GraphReport;
}

export const QUICK_SETUP_PREFIX = "qs.";

const article = (kind: PluginKind): string => (kind === "executor" ? `an ${kind}` : `a ${kind}`);
const BAD_TAG_CHARS = /[/?#\s]/;

/** Splits `type param...` (the param keeps its inner spacing). */
export function splitQuickSetup(expr: string): { type: string; param: string } {
  const text = expr.trim();
  const space = text.search(/\s/);
  return space < 0 ? { type: text, param: "" } : { type: text.slice(0, space), param: text.slice(space + 1).trim() };
}

/** Shorthand → schema (defaults filled) → semantic check. Returns args or the problems. */
export function resolveArgs(def: AnyDefinition, raw: unknown, env: CheckEnv): { args: unknown; problems: ArgProblem[]; keyPaths: Set<string> } {
  const keyPaths = new Set<string>();
  let args: unknown;
  try {
    args = def.shorthand ? def.shorthand(raw) : raw === undefined || raw === null ? {} : raw;
  } catch (err) {
    if (err instanceof ArgError) return { args: undefined, problems: [{ path: err.path, message: err.message }], keyPaths };
    throw err;
  }
  const schemaProblems = validateSchema(def.schema, args);
  if (schemaProblems.length > 0) {
    for (const p of schemaProblems) if (p.key) keyPaths.add(p.path.join("/"));
    return { args, problems: schemaProblems.map((p) => ({ path: p.path, message: p.message })), keyPaths };
  }
  const problems = def.check ? def.check(args, env) : [];
  return { args, problems, keyPaths };
}

/** What each namespace's declaring plugin declares (`declares` of its definition), first plugin per namespace. */
export function collectDeclared(plugins: readonly { tag: string; def: AnyDefinition; args: unknown }[]): Map<string, DeclaredNames> {
  const spaces = new Map<string, DeclaredNames>();
  for (const p of plugins) {
    if (!p.def.declares) continue;
    for (const [space, names] of Object.entries(p.def.declares(p.args))) if (!spaces.has(space)) spaces.set(space, { tag: p.tag, names: new Set(names) });
  }
  return spaces;
}

class Analyzer implements CheckEnv {
  readonly problems: Diagnostic[] = [];
  private names = new Map<string, DeclaredNames>();
  constructor(
    private readonly catalog: Catalog,
    private readonly outbound: SluiceConfig["outbound"],
  ) {}

  declared(space: string): DeclaredNames | null {
    return this.names.get(space) ?? null;
  }

  /**
   * Reads the names declaring plugins declare, before any plugin's check may ask for them. Args the
   * schema refuses declare nothing; args only the plugin's own check refuses still declare (a bad MAC
   * is reported once, at its line, not again at every `client` naming that client).
   */
  collectNames(plugins: readonly PluginConfig[]): void {
    const declaring: { tag: string; def: AnyDefinition; args: unknown }[] = [];
    for (const p of plugins) {
      const found = this.lookup(p.type);
      if (!("def" in found) || !found.def.declares) continue;
      const r = resolveArgs({ ...found.def, check: undefined }, p.args, this);
      if (r.problems.length === 0) declaring.push({ tag: p.tag, def: found.def, args: r.args });
    }
    this.names = collectDeclared(declaring);
  }

  outboundProblem(name: string): string | null {
    return outboundProblem(name, this.outbound);
  }

  lookup(type: string): { def: AnyDefinition } | { error: string } {
    const found = this.catalog.lookup(type);
    if ("def" in found) return found;
    return { error: found.error };
  }

  isExecutorType(word: string): boolean {
    const found = this.lookup(word);
    return "def" in found && found.def.kind === "executor";
  }

  quickSetup(kind: "executor" | "matcher", expr: string, at: (string | number)[]): { problems: ArgProblem[]; deps: DependencySpec[] } {
    const { type, param } = splitQuickSetup(expr);
    const found = this.lookup(type);
    if ("error" in found) return { problems: [{ path: at, message: `'${expr}': ${found.error}` }], deps: [] };
    const def = found.def;
    if (def.kind !== kind) return { problems: [{ path: at, message: `'${type}' is ${article(def.kind)}, not ${article(kind)}` }], deps: [] };
    if (!def.quickSetup) return { problems: [{ path: at, message: `'${type}' has no quick-setup form; declare it under plugins and use $tag` }], deps: [] };
    let raw: unknown;
    try {
      raw = def.quickSetup(param);
    } catch (err) {
      if (err instanceof ArgError) return { problems: [{ path: at, message: `'${expr}': ${err.message}` }], deps: [] };
      throw err;
    }
    const r = resolveArgs(def, raw, this);
    if (r.problems.length > 0) {
      return { problems: r.problems.map((p) => ({ path: at, message: `'${expr}': ${p.message}` })), deps: [] };
    }
    const deps = (def.dependencies?.(r.args, this) ?? []).map((d) => ({ ...d, argsPath: at }));
    return { problems: [], deps };
  }

  report(p: PluginConfig, path: (string | number)[], message: string, key = false): void {
    this.problems.push(p.source.locate([...p.path, ...path], `plugin '${p.tag}': ${message}`, key));
  }
}

/** Null when `profiles` has one named `name`; otherwise the message saying it does not. */
export function outboundProblem(name: string, profiles: SluiceConfig["outbound"]): string | null {
  return Object.hasOwn(profiles, name) ? null : unknownOutbound(name, profiles);
}

/** Analyses a loaded configuration. Throws ConfigError with every problem found. */
export function analyzeConfig(config: SluiceConfig, catalog: Catalog): Analysis {
  const a = new Analyzer(catalog, config.outbound);
  const byTag = new Map<string, ResolvedPlugin>();
  const resolved: ResolvedPlugin[] = [];
  const firstSeen = new Map<string, PluginConfig>();
  const runtimeWide = new Map<string, PluginConfig>();
  a.collectNames(config.plugins);

  for (const p of config.plugins) {
    if (p.tag.startsWith(QUICK_SETUP_PREFIX)) a.report(p, ["tag"], `tags starting with '${QUICK_SETUP_PREFIX}' are reserved for quick-setup instances`);
    else if (BAD_TAG_CHARS.test(p.tag)) a.report(p, ["tag"], "tag may not contain '/', '?', '#' or whitespace");
    const first = firstSeen.get(p.tag);
    if (first) {
      const where = first.source.locate(first.path, "");
      a.report(p, ["tag"], `duplicate tag (first declared at ${where.file ?? "<config>"}:${where.line}:${where.column})`);
      continue;
    }
    firstSeen.set(p.tag, p);
    const found = a.lookup(p.type);
    if ("error" in found) {
      a.report(p, ["type"], found.error);
      continue;
    }
    if (found.def.runtimeWide === true) {
      const other = runtimeWide.get(p.type);
      if (other) {
        const where = other.source.locate(other.path, "");
        a.report(p, ["type"], `a configuration has one '${p.type}' plugin (the first is '${other.tag}' at ${where.file ?? "<config>"}:${where.line}:${where.column})`);
        continue;
      }
      runtimeWide.set(p.type, p);
    }
    const r = resolveArgs(found.def, p.args, a);
    if (r.problems.length > 0) {
      for (const prob of r.problems) {
        const isKey = r.keyPaths.has(prob.path.join("/"));
        // An unknown key is named by the message; label it with the mapping that holds it.
        const labelPath = isKey ? prob.path.slice(0, -1) : prob.path;
        a.report(p, ["args", ...prob.path], `${renderPath(["args", ...labelPath])}: ${prob.message}`, isKey);
      }
      continue;
    }
    const deps = found.def.dependencies?.(r.args, a) ?? [];
    const rp: ResolvedPlugin = { config: p, def: found.def, args: r.args, deps };
    resolved.push(rp);
    byTag.set(p.tag, rp);
  }

  // Unknown/invalid plugins are absent from byTag; references to them must not add noise.
  const declared = new Set(config.plugins.map((p) => p.tag));
  for (const rp of resolved) {
    for (const d of rp.deps) {
      const field = renderPath(["args", ...d.argsPath]);
      const target = byTag.get(d.target);
      if (d.target === rp.config.tag) a.report(rp.config, ["args", ...d.argsPath], `${field} references itself`);
      else if (!target) {
        if (!declared.has(d.target)) a.report(rp.config, ["args", ...d.argsPath], `${field} references missing plugin '${d.target}'`);
      } else if (target.def.kind !== d.kind) {
        a.report(rp.config, ["args", ...d.argsPath], `${field} expects ${article(d.kind)}, but '${d.target}' is ${article(target.def.kind)} (type '${target.def.type}')`);
      } else if (d.pluginType && target.def.type !== d.pluginType) {
        a.report(rp.config, ["args", ...d.argsPath], `${field} expects plugin type '${d.pluginType}', but '${d.target}' has type '${target.def.type}'`);
      } else if (d.refuseType && target.def.type === d.refuseType.type) {
        a.report(rp.config, ["args", ...d.argsPath], `${field} references '${d.target}' (type '${target.def.type}'): ${d.refuseType.reason}`);
      }
    }
  }
  if (a.problems.length > 0) throw new ConfigError(a.problems);

  const order = initOrder(resolved);
  if ("cycle" in order) {
    const first = byTag.get(order.cycle[0]) as ResolvedPlugin;
    a.report(first.config, ["tag"], `dependency cycle: ${renderChain(order.cycle)}`);
    throw new ConfigError(a.problems);
  }
  for (const p of callDepthProblems(order.order, byTag)) a.report(p.plugin.config, ["args", ...p.argsPath], p.message);
  if (a.problems.length > 0) throw new ConfigError(a.problems);
  const live = liveSet(resolved, byTag);
  return {
    plugins: resolved,
    byTag,
    initOrder: order.order.filter((t) => live.has(t)),
    skipped: resolved.filter((r) => !live.has(r.config.tag)).map((r) => r.config.tag),
    graph: {
      nodes: resolved.map((r) => ({ tag: r.config.tag, type: r.def.type, kind: r.def.kind })).sort((x, y) => x.tag.localeCompare(y.tag)),
      edges: resolved.flatMap((r) =>
        r.deps.map((d) => ({ from: r.config.tag, field: renderPath(["args", ...d.argsPath]), to: d.target, kind: d.kind, plugin_type: d.pluginType ?? null })),
      ),
      init_order: order.order,
    },
  };
}

/**
 * Kahn's algorithm: zero-dependency tags alphabetically, those of `createdFirst` types (download:
 * files others read at create) ahead of the rest, then dependents as they become ready.
 */
function initOrder(plugins: ResolvedPlugin[]): { order: string[] } | { cycle: string[] } {
  const first = new Set(plugins.filter((p) => p.def.createdFirst === true).map((p) => p.config.tag));
  const rank = (tag: string): number => (first.has(tag) ? 0 : 1);
  const remaining = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const p of plugins) {
    const targets = new Set(p.deps.map((d) => d.target));
    remaining.set(p.config.tag, targets.size);
    for (const t of targets) {
      const list = dependents.get(t) ?? [];
      list.push(p.config.tag);
      dependents.set(t, list);
    }
  }
  const queue = [...remaining]
    .filter(([, n]) => n === 0)
    .map(([t]) => t)
    .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  const order: string[] = [];
  for (let head = 0; head < queue.length; head++) {
    const tag = queue[head];
    order.push(tag);
    for (const d of dependents.get(tag) ?? []) {
      const n = (remaining.get(d) as number) - 1;
      remaining.set(d, n);
      if (n === 0) queue.push(d);
    }
  }
  if (order.length === plugins.length) return { order };
  return { cycle: findCycle(plugins, new Set(order)) };
}

/** A long cycle or chain named by its ends, so one message never lists thousands of tags. */
function renderChain(tags: string[]): string {
  return tags.length > 12 ? `${tags.slice(0, 5).join(" -> ")} -> ... (${tags.length - 7} more) -> ${tags.slice(-2).join(" -> ")}` : tags.join(" -> ");
}

/** Depth-first search with an explicit stack: a chain of thousands of plugins must not overflow the JS stack. */
function findCycle(plugins: ResolvedPlugin[], done: Set<string>): string[] {
  const edges = new Map(plugins.map((p) => [p.config.tag, [...new Set(p.deps.map((d) => d.target))].sort()]));
  const visited = new Set<string>();
  for (const start of [...edges.keys()].filter((t) => !done.has(t)).sort()) {
    if (visited.has(start)) continue;
    // Each frame: a tag and the index of its next edge to try; `path` mirrors the frames.
    const frames: { tag: string; next: number }[] = [{ tag: start, next: 0 }];
    const path = [start];
    const onPath = new Set([start]);
    visited.add(start);
    while (frames.length > 0) {
      const top = frames[frames.length - 1];
      const targets = edges.get(top.tag) ?? [];
      if (top.next >= targets.length) {
        frames.pop();
        onPath.delete(path.pop() as string);
        continue;
      }
      const next = targets[top.next++];
      if (done.has(next)) continue;
      if (onPath.has(next)) return [...path.slice(path.indexOf(next)), next];
      if (visited.has(next)) continue;
      visited.add(next);
      onPath.add(next);
      path.push(next);
      frames.push({ tag: next, next: 0 });
    }
  }
  return [...edges.keys()].filter((t) => !done.has(t));
}

/** Servers, executors, matchers and runtime-wide providers are live; other providers only when a live plugin reaches them. */
function liveSet(plugins: ResolvedPlugin[], byTag: Map<string, ResolvedPlugin>): Set<string> {
  const live = new Set<string>();
  const pending = plugins.filter((p) => p.def.kind !== "provider" || p.def.runtimeWide === true).map((p) => p.config.tag);
  while (pending.length > 0) {
    const tag = pending.pop() as string;
    if (live.has(tag)) continue;
    live.add(tag);
    for (const d of byTag.get(tag)?.deps ?? []) if (!live.has(d.target)) pending.push(d.target);
  }
  return live;
}
