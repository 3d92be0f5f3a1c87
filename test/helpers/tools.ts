// The programs the suite drives besides npm packages (test/tools.json). `npm test` installs the
// missing ones before any test runs (test/provision.mjs); a test that needs one calls requireTool,
// which fails (never skips) with the package to install when it is absent.

import { accessSync, constants, existsSync, readdirSync, readFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";

interface Tool {
  command: string;
  package: string;
  path?: string;
  for: string;
}

const TOOLS = (JSON.parse(readFileSync(join(import.meta.dirname, "..", "tools.json"), "utf8")) as { tools: Tool[] }).tools;

function onPath(command: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, command), constants.X_OK);
      return join(dir, command);
    } catch {
      // not in this directory
    }
  }
  return null;
}

/** The first file matching `pattern`, whose one `*` stands for a directory name (newest name first). */
function matchPath(pattern: string): string | null {
  const star = pattern.indexOf("*");
  if (star < 0) return existsSync(pattern) ? pattern : null;
  const parent = dirname(pattern.slice(0, star + 1));
  const rest = pattern.slice(pattern.indexOf("/", star));
  if (!existsSync(parent)) return null;
  const entries = readdirSync(parent).sort((a, b) => b.localeCompare(a, undefined, { numeric: true }));
  for (const entry of entries) if (existsSync(join(parent, entry, rest))) return join(parent, entry, rest);
  return null;
}

/** The path of `command` (listed in test/tools.json); throws naming its Debian package when it is missing. */
export function requireTool(command: string): string {
  const tool = TOOLS.find((t) => t.command === command);
  if (!tool) throw new Error(`${command} is not listed in test/tools.json: add it there (command, package, what for) so npm test installs it`);
  const found = tool.path ? matchPath(tool.path) : onPath(tool.command);
  if (found === null) throw new Error(`${command} is needed (${tool.for}): install the Debian package ${tool.package} (npm test does this itself as root or with sudo -n, unless SLUICE_TEST_INSTALL=0)`);
  return found;
}
