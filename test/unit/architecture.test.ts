// Structural rules of the code base that a reviewer would otherwise check by hand: the API never
// imports the App (it sees the process through src/api/host.ts), and no handler picks an HTTP
// status — statuses come from the error table (src/api/errors.ts) and refusing guards
// (src/api/guards.ts).
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

/** Relative imports of a file, resolved to repository paths (".js" → ".ts"). */
function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)[^"']*?from\s*["'](\.[^"']+)["']/g)) {
    out.push(relative(root, resolve(dirname(file), m[1].replace(/\.js$/, ".ts"))));
  }
  for (const m of text.matchAll(/import\(\s*["'](\.[^"']+)["']\s*\)/g)) out.push(relative(root, resolve(dirname(file), m[1].replace(/\.js$/, ".ts"))));
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
