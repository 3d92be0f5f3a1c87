// Every ajv instance of the program, and the one set of options API requests validate with:
//  - the configuration's (the top level and each plugin's args): all errors, turned into located,
//    readable problems ("unknown field 'x'", "'timeout' must be integer", ...) by validateSchema;
//  - the API's: query strings and paths are text and are coerced to their schema types
//    (`coercingAjv`, and fastify's own compiler for the other routes, src/api/server.ts); a JSON
//    body already has types (`strictAjv`: {"index": "1"} is not an integer, and a save must not
//    turn 42 into "42").

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";

/** How API requests are validated: the first error only, defaults filled in, nothing removed. */
export const API_REQUEST_OPTIONS = { allErrors: false, removeAdditional: false, useDefaults: true, allowUnionTypes: true } as const;
/** Query strings and path parameters (text) become the types their schemas say. */
export const coercingAjv = new Ajv({ ...API_REQUEST_OPTIONS, strict: false, coerceTypes: true });
/** JSON bodies keep the types they were sent with. */
export const strictAjv = new Ajv({ ...API_REQUEST_OPTIONS, strict: false, coerceTypes: false });

export interface SchemaProblem {
  /** Path of the offending value (for unknown fields: of the unknown key). */
  path: (string | number)[];
  /** True when `path` names a mapping key rather than a value. */
  key: boolean;
  message: string;
}

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, allowUnionTypes: true });
const compiled = new WeakMap<object, ValidateFunction>();

function pointerToPath(pointer: string): (string | number)[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function describe(path: (string | number)[]): string {
  const last = path[path.length - 1];
  return last === undefined ? "value" : typeof last === "number" ? `item ${last}` : `'${last}'`;
}

function toProblem(e: ErrorObject): SchemaProblem {
  const path = pointerToPath(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "additionalProperties":
      return { path: [...path, String(p.additionalProperty)], key: true, message: `unknown field '${String(p.additionalProperty)}'` };
    case "required":
      return { path, key: false, message: `missing required field '${String(p.missingProperty)}'` };
    case "type":
      return { path, key: false, message: `${describe(path)} must be ${String(p.type).replace(",", " or ")}` };
    case "enum":
      return { path, key: false, message: `${describe(path)} must be one of: ${(p.allowedValues as unknown[]).map(String).join(", ")}` };
    case "const":
      return { path, key: false, message: `${describe(path)} must be ${JSON.stringify(p.allowedValue)}` };
    default:
      return { path, key: false, message: `${describe(path)} ${e.message ?? "is invalid"}` };
  }
}

/** Validates (and fills defaults into) `data`; returns every problem, most specific first. */
export function validateSchema(schema: object, data: unknown): SchemaProblem[] {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    compiled.set(schema, fn);
  }
  if (fn(data)) return [];
  const errors = fn.errors ?? [];
  // anyOf/oneOf summaries repeat what their branches said; keep the branch errors.
  const useful = errors.filter((e) => e.keyword !== "anyOf" && e.keyword !== "oneOf" && e.keyword !== "if");
  const seen = new Set<string>();
  const out: SchemaProblem[] = [];
  for (const e of useful.length > 0 ? useful : errors) {
    const problem = toProblem(e);
    const id = `${problem.path.join("/")}|${problem.message}`;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(problem);
  }
  return out;
}
