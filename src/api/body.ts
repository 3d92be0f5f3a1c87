// What the API's routes share for reading requests: the JSON body of routes that take their body as
// bytes (plugin routes, upgrade), and the validator compiler of routes whose body is JSON (no
// coercion: the ajv instances are those of src/config/ajv.ts).

import type { FastifySchemaCompiler } from "fastify";
import { strictAjv } from "../config/ajv.js";
import { ApiError, type ErrorCode } from "./errors.js";

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
