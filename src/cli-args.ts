// Command-line options of `sluice start|check`, `sluice upgrade ...`, `sluice probe ...` and `sluice passwd`, parsed by node:util's
// parseArgs (strict: an unknown option, a missing value or a stray argument is an error), with its
// errors worded the way the help reads: "unknown option '--x'", "--config needs a value".

import { parseArgs } from "node:util";

/** A mistake on the command line: the CLI prints it with the help and exits 2. */
export class UsageError extends Error {}

export type OptionSpec = Record<string, { type: "string" | "boolean"; short?: string }>;
export type OptionValues = Record<string, string | boolean | undefined>;

/** The options `args` gives, of those `spec` allows. */
export function parseOptions(args: string[], spec: OptionSpec): OptionValues {
  return parseArguments(args, spec, false).values;
}

/** The options and, where `positionals` allows them, the other arguments (`sluice probe upstream ADDRESS...`). */
export function parseArguments(args: string[], spec: OptionSpec, positionals = true): { values: OptionValues; positionals: string[] } {
  try {
    const parsed = parseArgs({ args, options: spec, strict: true, allowPositionals: positionals });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const named = /'([^' ,]+)/.exec((err as Error).message)?.[1] ?? "";
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw new UsageError(`unknown option '${named}'`);
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      throw new UsageError((err as Error).message.includes("does not take an argument") ? `${named} takes no value` : `${longName(named, spec)} needs a value`);
    }
    if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") throw new UsageError(`unexpected argument '${named}'`);
    throw err;
  }
}

/** `-c` → `--config` (parseArgs names an option by its short form when that is what was typed). */
function longName(flag: string, spec: OptionSpec): string {
  const short = /^-(\w)$/.exec(flag)?.[1];
  const long = short === undefined ? undefined : Object.entries(spec).find(([, o]) => o.short === short)?.[0];
  return long === undefined ? flag : `--${long}`;
}
