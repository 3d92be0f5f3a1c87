// `env`: true when an environment variable is set (or has a given value), read once at start-up.

import { ArgError, definePlugin, type ArgProblem } from "../../registry/types.js";

interface EnvArgs {
  key: string;
  /** Absent: the variable only has to be set. */
  value?: string;
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `"KEY"`, `"KEY value"`, `"KEY=value"` → {key, value?}. */
function parseText(text: string): EnvArgs {
  const t = text.trim();
  const space = t.search(/\s/);
  const head = space < 0 ? t : t.slice(0, space);
  const eq = head.indexOf("=");
  if (eq >= 0) return { key: t.slice(0, eq), value: t.slice(eq + 1) };
  return space < 0 ? { key: t } : { key: head, value: t.slice(space + 1).trim() };
}

function shorthand(raw: unknown): unknown {
  if (typeof raw === "string") return parseText(raw);
  if (Array.isArray(raw)) {
    const items = raw as unknown[];
    if (items.length === 1 && typeof items[0] === "string") return parseText(items[0]);
    if (items.length === 2 && typeof items[0] === "string" && (typeof items[1] === "string" || typeof items[1] === "number")) {
      return { key: items[0].trim(), value: String(items[1]) };
    }
    throw new ArgError("expects [KEY] or [KEY, VALUE]");
  }
  if (raw === null || raw === undefined) throw new ArgError("needs an environment variable name");
  return raw;
}

function problems(args: EnvArgs): ArgProblem[] {
  return KEY.test(args.key) ? [] : [{ path: ["key"], message: `'${args.key}' is not an environment variable name` }];
}

export const envMatcher = definePlugin<EnvArgs, "matcher">({
  type: "env",
  kind: "matcher",
  feature: "core",
  summary: "Matches when an environment variable is set, or equals a value (read once at start-up).",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["key"],
    properties: { key: { type: "string", minLength: 1 }, value: { type: "string" } },
  },
  shorthand,
  quickSetup: (param) => param,
  check: problems,
  create(args) {
    const bad = problems(args);
    if (bad.length > 0) throw new ArgError(bad[0].message, bad[0].path);
    const actual = process.env[args.key];
    const result = args.value === undefined ? actual !== undefined : actual === args.value;
    return { match: () => result };
  },
});
