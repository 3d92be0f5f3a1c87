// What the API's routes share for reading requests: the JSON body of routes that take their body as
// bytes (plugin routes, upgrade), and the two ajv instances route schemas compile with — query
// strings and paths are text and are coerced to their types; a JSON body already has types
// ({"index": "1"} is not an integer, and a save must not turn 42 into "42").

import { Ajv } from "ajv";
import type { FastifySchemaCompiler } from "fastify";
import { ApiError, type ErrorCode } from "./errors.js";

const options = { allErrors: false, removeAdditional: false, useDefaults: true, allowUnionTypes: true, strict: false } as const;
export const coercingAjv = new Ajv({ ...options, coerceTypes: true });
export const strictAjv = new Ajv({ ...options, coerceTypes: false });

/** A route's validator compiler for a JSON body (no coercion). */
export const strictBody: FastifySchemaCompiler<unknown> = ({ schema }) => strictAjv.compile(schema as object);

/** An empty body is `{}`; anything else must be JSON, or the request is refused with `code`. */
export function jsonBody(raw: unknown, code: ErrorCode): unknown {
  const text = Buffer.isBuffer(raw) ? raw.toString("utf8") : typeof raw === "string" ? raw : "";
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(code, `body is not valid JSON: ${(err as Error).message}`);
  }
}
