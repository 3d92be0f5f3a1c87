// Structural rules of the code base that a reviewer would otherwise check by hand: the layers of src/
// (cli → app → api/plugins → registry → engine → dns) are only ever imported downwards, the API never
// imports the App (it sees the process through src/api/host.ts), and no handler picks an HTTP
// status — statuses come from the error table (src/api/errors.ts) and refusing guards
// (src/api/guards.ts), which alone answer "busy" or "unavailable".
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { expect, test } from "vitest";

const root = join(import.meta.dirname, "..", "..");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** Relative imports of a file (static, side-effect and dynamic), resolved to repository paths (".js" → ".ts"). */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)[^"']*?from\s*["'](\.[^"']+)["']/g)) {
    out.push(relative(root, resolve(dirname(file), m[1].replace(/\.js$/, ".ts"))));
  }
  for (const m of text.matchAll(/import\(\s*["'](\.[^"']+)["']\s*\)/g)) out.push(relative(root, resolve(dirname(file), m[1].replace(/\.js$/, ".ts"))));
  // Side-effect imports: `import "./x.js";`.
  for (const m of text.matchAll(/(?:^|\n)\s*import\s*["'](\.[^"']+)["']/g)) out.push(relative(root, resolve(dirname(file), m[1].replace(/\.js$/, ".ts"))));
  return out;
}

test("src/api never imports src/app (the App implements the API's host interface instead)", () => {
  const offenders = files(join(root, "src", "api")).flatMap((f) => imports(f).filter((i) => i.startsWith("src/app/")).map((i) => `${relative(root, f)} → ${i}`));
  expect(offenders).toEqual([]);
});

test("configuration, the plugin contract and the plugins (src/config, src/registry, src/plugins) depend on neither the API nor the App", () => {
  const dirs = [join(root, "src", "config"), join(root, "src", "registry"), join(root, "src", "plugins")];
  const offenders = dirs.flatMap(files).flatMap((f) => imports(f).filter((i) => i.startsWith("src/api/") || i.startsWith("src/app/")).map((i) => `${relative(root, f)} → ${i}`));
  expect(offenders).toEqual([]);
});

test("no HTTP status is decided in a route handler: no numeric status outside the tables", () => {
  const handlers = [...files(join(root, "src", "api", "routes")), ...files(join(root, "src", "plugins"))];
  const offenders: string[] = [];
  for (const f of handlers) {
    readFileSync(f, "utf8")
      .split("\n")
      .forEach((line, i) => {
        // reply.code(409), new ApiError(503, …), statusCode = 500 …; 202 for accepted work is declared with the route.
        if (/\.code\(\s*[45]\d\d\b|ApiError\(\s*\d|statusCode\s*=\s*\d|status:\s*[45]\d\d\b/.test(line)) offenders.push(`${relative(root, f)}:${i + 1}: ${line.trim()}`);
      });
  }
  expect(offenders).toEqual([]);
});

/**
 * The layers of src/, top to bottom. A file may import its own layer or a lower one. api and plugins
 * are one layer of two independent parts: neither imports the other (the API serves plugin routes
 * through the registry's contract, src/registry/control.ts; plugins answer with RouteError codes).
 * Directories outside the list (config, cluster, observability, net, upgrade, release) are shared
 * helpers; src/config has its own rule below.
 */
const LAYERS: { name: string; rank: number; holds: (path: string) => boolean }[] = [
  { name: "cli", rank: 5, holds: (p) => p === "src/cli.ts" },
  { name: "app", rank: 4, holds: (p) => p.startsWith("src/app/") },
  { name: "api", rank: 3, holds: (p) => p.startsWith("src/api/") },
  { name: "plugins", rank: 3, holds: (p) => p.startsWith("src/plugins/") },
  { name: "registry", rank: 2, holds: (p) => p.startsWith("src/registry/") },
  { name: "engine", rank: 1, holds: (p) => p.startsWith("src/engine/") },
  { name: "dns", rank: 0, holds: (p) => p.startsWith("src/dns/") },
];
const layerOf = (path: string): (typeof LAYERS)[number] | undefined => LAYERS.find((l) => l.holds(path));

/** Every relative import of the files under `dirs`, as "file → import". */
function edges(dirs: string[]): { from: string; to: string }[] {
  return dirs.flatMap((d) => files(join(root, d))).flatMap((f) => imports(f).map((to) => ({ from: relative(root, f), to })));
}

test("no upward import across the layers cli → app → api/plugins → registry → engine → dns", () => {
  const all = edges(["src"]);
  const offenders = all.flatMap(({ from, to }) => {
    const a = layerOf(from);
    const b = layerOf(to);
    if (!a || !b || a === b) return [];
    // Same rank, other layer: api and plugins, which never import each other.
    return b.rank >= a.rank ? [`${from} (${a.name}) → ${to} (${b.name})`] : [];
  });
  expect(offenders).toEqual([]);
  // The scan sees the layers' real edges (a broken pattern would find none and pass).
  expect(all.some(({ from, to }) => from.startsWith("src/plugins/") && to.startsWith("src/registry/"))).toBe(true);
  expect(all.some(({ from, to }) => from.startsWith("src/engine/") && to.startsWith("src/dns/"))).toBe(true);
});

test("no import from src/api into machines/, src/registry or src/engine", () => {
  const offenders = edges(["machines", "src/registry", "src/engine"])
    .filter(({ to }) => to.startsWith("src/api/"))
    .map(({ from, to }) => `${from} → ${to}`);
  expect(offenders).toEqual([]);
});

test("src/config drives no actor and needs no plugin: it imports neither machines/, actors/ nor src/plugins (that is the app's: src/app/config-save.ts, validate-pool.ts, validate-worker.ts)", () => {
  const offenders = edges(["src/config"])
    .filter(({ to }) => to.startsWith("machines/") || to.startsWith("actors/") || to.startsWith("src/plugins/"))
    .map(({ from, to }) => `${from} → ${to}`);
  expect(offenders).toEqual([]);
});

/** A refusal's code: something is busy, unavailable or stopping. */
const REFUSAL_CODE = /^(?:[a-z_]+_busy|[a-z_]+_unavailable|shutting_down|shutdown_in_progress)$/;

/** Literal error codes built in a file: `new ApiError("…"`, `new RouteError("…"` (and subclasses), and `code: "…"` of an error reply. */
function builtCodes(file: string): { line: number; code: string }[] {
  const out: { line: number; code: string }[] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((text, i) => {
      for (const m of text.matchAll(/new \w*(?:ApiError|RouteError)\(\s*["'`]([a-z_]+)["'`]|\bcode:\s*["'`]([a-z_]+)["'`]/g)) out.push({ line: i + 1, code: m[1] ?? m[2] });
    });
  return out;
}

test("no ApiError/RouteError with a busy or unavailable code outside the guard table", () => {
  const guards = join(root, "src", "api", "guards.ts");
  const scanned = [...files(join(root, "src")), ...files(join(root, "machines")), ...files(join(root, "actors"))];
  // A refusal is a guard's (GUARD_REFUSALS) or a gone actor's; admitted work that fails has a *_failed code.
  const offenders = scanned
    .filter((f) => f !== guards)
    .flatMap((f) => builtCodes(f).filter(({ code }) => REFUSAL_CODE.test(code)).map(({ line, code }) => `${relative(root, f)}:${line}: ${code}`));
  expect(offenders).toEqual([]);
  // The scan finds the refusals the guard table builds (a broken pattern would find none and pass).
  expect(builtCodes(guards).map(({ code }) => code)).toEqual(expect.arrayContaining(["plugin_unavailable", "query_recorder_unavailable", "cache_busy", "shutting_down"]));
});
