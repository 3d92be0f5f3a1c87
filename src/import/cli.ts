// `sluice import <source> <file or dir> [-o DIR] [--force]`: writes DIR/sluice.yaml (with a header of
// what could not be imported) and the rule files it names, then checks the result as `sluice check` would.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArguments, UsageError } from "../cli-args.js";
import { checkConfig } from "../app/app.js";
import { ConfigError, formatDiagnostic } from "../config/diagnostics.js";
import { createCatalog } from "../plugins/catalog.js";
import { VERSION } from "../version.js";
import { IMPORTERS } from "./index.js";
import { ImportError, type ImportResult } from "./types.js";

/** What each source's input is, for the help. */
const SOURCE_INPUT: Record<string, string> = {
  adguardhome: "AdGuardHome.yaml (the file, or the directory that holds it)",
  pihole: "Pi-hole v6: the directory with pihole.toml and gravity.db (/etc/pihole), or pihole.toml\n                (gravity.db is then read from beside it)",
  blocky: "blocky's config.yml",
  mosdns: "mosdns v5's configuration (YAML)",
};

export const IMPORT_HELP = `Usage: sluice import <source> <file or dir> [-o DIR] [--force]

Reads another DNS tool's configuration and writes a Sluice configuration that does what it did:
DIR/sluice.yaml (default DIR: ./sluice-import) and the rule files it names. Settings that have no
equivalent here are listed at the top of sluice.yaml and on stderr; nothing is dropped silently.

Sources in this build:
${Object.keys(IMPORTERS)
  .map((s) => `  ${s.padEnd(13)} ${SOURCE_INPUT[s] ?? ""}\n`)
  .join("")}
Options:
  -o, --output DIR   where to write (default ./sluice-import); created when missing
      --force        overwrite files that are already there

Exits 0 when the configuration is written (even with unsupported settings), 1 when the source
cannot be read or the result does not pass the check, 2 on a usage error.
`;

const SPEC = { output: { type: "string", short: "o" }, force: { type: "boolean" } } as const;

/** The comment block that heads the written file. */
export function header(source: string, from: string, result: ImportResult): string {
  const lines = [`Imported from ${source} (${from}) by sluice import ${VERSION}.`];
  if (result.unsupported.length === 0) lines.push("Every setting of the source was imported.");
  else {
    lines.push("Settings with no equivalent in Sluice (not imported):");
    for (const u of result.unsupported) lines.push(`  - ${u}`);
  }
  if (result.notes.length > 0) {
    lines.push("Notes:");
    for (const n of result.notes) lines.push(`  - ${n}`);
  }
  return lines.map((l) => `# ${l}`.trimEnd()).join("\n") + "\n\n";
}

export async function runImportCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArguments(argv, SPEC);
  const [source, input, ...extra] = positionals;
  if (source === undefined || input === undefined) throw new UsageError("import needs a source and a file or directory");
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const load = IMPORTERS[source];
  if (load === undefined) throw new UsageError(`unknown source '${source}' (this build imports: ${Object.keys(IMPORTERS).join(", ")})`);
  const outDir = resolve(typeof values.output === "string" ? values.output : "sluice-import");
  let result: ImportResult;
  try {
    result = await (await load()).importConfig(resolve(input));
  } catch (err) {
    if (!(err instanceof ImportError)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    return 1;
  }
  const targets = ["sluice.yaml", ...Object.keys(result.files)];
  const present = targets.filter((t) => existsSync(join(outDir, t)));
  if (present.length > 0 && values.force !== true) {
    process.stderr.write(`error: ${present.map((p) => join(outDir, p)).join(", ")} already exist${present.length === 1 ? "s" : ""}: nothing written (--force overwrites)\n`);
    return 1;
  }
  for (const [name, content] of Object.entries(result.files)) {
    mkdirSync(dirname(join(outDir, name)), { recursive: true });
    writeFileSync(join(outDir, name), content);
  }
  const configPath = join(outDir, "sluice.yaml");
  mkdirSync(outDir, { recursive: true });
  writeFileSync(configPath, header(source, resolve(input), result) + result.yaml);
  for (const u of result.unsupported) process.stderr.write(`unsupported: ${u}\n`);
  for (const n of result.notes) process.stderr.write(`note: ${n}\n`);
  try {
    checkConfig(configPath, createCatalog());
  } catch (err) {
    process.stderr.write(`error: the written configuration does not pass the check (please report it):\n`);
    if (err instanceof ConfigError) for (const d of err.diagnostics) process.stderr.write(formatDiagnostic(d) + "\n");
    else process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  process.stdout.write(`wrote ${configPath} and ${Object.keys(result.files).length} file(s); ${result.unsupported.length} setting(s) not imported\n`);
  process.stdout.write(`start it with: sluice start -c ${configPath} -d ${outDir}\n`);
  return 0;
}
