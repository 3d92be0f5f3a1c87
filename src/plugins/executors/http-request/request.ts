// `http_request`'s args: the schema, the checks `sluice check` runs, and the request compiled once
// from them — URL, query parameters, headers and body as templates over one TemplateSet, so a query
// only captures the values of the keys used and the request is built from them when it is sent.

import { validateHeaderValue, type OutgoingHttpHeaders } from "node:http";
import { durationProblem, durationSchema, parseDuration } from "../../../engine/duration.js";
import { render, TemplateSet, type Template } from "../../../engine/template.js";
import type { SendRequest } from "../../../net/http-send.js";
import { parseSocks5 } from "../../../net/socks5.js";
import { VERSION } from "../../../version.js";
import { ArgError, type ArgProblem, type CheckEnv } from "../../../registry/types.js";
import { errorModeSchema, HookError, type ErrorMode } from "../hooks/failures.js";

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

export interface HttpRequestArgs {
  method: string;
  url: string;
  phase: "before" | "after";
  async: boolean;
  timeout: number | string;
  error_mode: ErrorMode;
  headers?: Record<string, string>;
  query_params?: Record<string, string>;
  body?: string;
  json?: Json;
  form?: Record<string, string>;
  content_type?: string;
  socks5?: string;
  outbound?: string;
  insecure_skip_verify: boolean;
  max_redirects: number;
  queue_size: number;
  max_concurrent: number;
}

const stringMap = { type: "object", additionalProperties: { type: "string" } } as const;

export const httpRequestSchema = {
  type: "object",
  additionalProperties: false,
  required: ["method", "url"],
  properties: {
    method: { type: "string", pattern: "^[A-Za-z]+$" },
    url: { type: "string", minLength: 1 },
    phase: { type: "string", enum: ["before", "after"], default: "after" },
    async: { type: "boolean", default: true },
    timeout: { ...durationSchema, default: "5s" },
    error_mode: errorModeSchema,
    headers: stringMap,
    query_params: stringMap,
    body: { type: "string" },
    json: { type: ["object", "array"] },
    form: stringMap,
    content_type: { type: "string", minLength: 1 },
    socks5: { type: "string", minLength: 1 },
    outbound: { type: "string", minLength: 1 },
    insecure_skip_verify: { type: "boolean", default: false },
    max_redirects: { type: "integer", minimum: 0, maximum: 20, default: 5 },
    queue_size: { type: "integer", minimum: 1, maximum: 65_536, default: 256 },
    max_concurrent: { type: "integer", minimum: 1, maximum: 64, default: 4 },
  },
} as const;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the client sets itself from the body. */
const OWN_HEADERS = new Set(["content-length", "transfer-encoding", "connection"]);

/** A value put into the URL: percent-encoded, but `:`, `,` and `@` (an IPv6 address, a list) as they are. */
export const urlValue = (v: string): string => encodeURIComponent(v).replace(/%3A/g, ":").replace(/%2C/g, ",").replace(/%40/g, "@");
/** A value inside a JSON string (the template's literal parts are JSON text already). */
const jsonValue = (v: string): string => JSON.stringify(v).slice(1, -1);

/** The URL template: scheme and host:port must be written out (a query must not choose where requests go). */
function compileUrl(set: TemplateSet, text: string): Template {
  const t = set.compile(text, ["url"]);
  const head = typeof t.parts[0] === "string" ? t.parts[0] : "";
  const literal = t.constant ?? head;
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/.exec(literal);
  if (!m || !/^https?$/i.test(m[1])) throw new ArgError(`'${text}' is not an http or https URL`, ["url"]);
  if (t.constant === null && literal.length === m[0].length) throw new ArgError(`the URL's scheme and host must be written out: template keys may appear only after the host (in the path, query or fragment)`, ["url"]);
  try {
    new URL(t.constant ?? `${m[0]}/`);
  } catch {
    throw new ArgError(`'${text}' is not a valid URL`, ["url"]);
  }
  if (m[2] === "") throw new ArgError(`'${text}' has no host`, ["url"]);
  return t;
}

/** A JSON body as one template over its text: string leaves templated, everything else as written. */
function compileJson(set: TemplateSet, value: Json): Template {
  const parts: (string | number)[] = [];
  const lit = (s: string): void => {
    if (typeof parts[parts.length - 1] === "string") parts[parts.length - 1] += s;
    else parts.push(s);
  };
  const walk = (v: Json, path: (string | number)[]): void => {
    if (typeof v === "string") {
      lit('"');
      for (const p of set.compile(v, path).parts) if (typeof p === "string") lit(jsonValue(p));
      else parts.push(p);
      lit('"');
    } else if (Array.isArray(v)) {
      lit("[");
      v.forEach((item, i) => {
        if (i > 0) lit(",");
        walk(item, [...path, i]);
      });
      lit("]");
    } else if (v !== null && typeof v === "object") {
      lit("{");
      Object.entries(v).forEach(([k, item], i) => {
        lit(`${i > 0 ? "," : ""}${JSON.stringify(k)}:`);
        walk(item, [...path, k]);
      });
      lit("}");
    } else lit(JSON.stringify(v));
  };
  walk(value, ["json"]);
  return { parts, constant: parts.length === 1 && typeof parts[0] === "string" ? parts[0] : null };
}

type Body = { kind: "raw" | "json"; template: Template } | { kind: "form"; fields: [string, Template][] };

export interface CompiledRequest {
  readonly set: TemplateSet;
  readonly method: string;
  readonly url: Template;
  readonly query: readonly [string, Template][];
  readonly headers: readonly [string, Template][];
  readonly body: Body | null;
  /** Content-Type from the body kind, unless a header sets it. */
  readonly contentType: string | null;
  readonly timeoutMs: number;
  /** A proxy of the plugin's own (over the outbound profile's). */
  readonly socks5: string | null;
  /** The URL, when nothing in it changes per query. */
  readonly fixedUrl: URL | null;
}

/** Compiles the args; throws an ArgError at the offending path. */
export function compileRequest(args: HttpRequestArgs): CompiledRequest {
  const set = new TemplateSet();
  const bodies = (["body", "json", "form"] as const).filter((k) => args[k] !== undefined);
  if (bodies.length > 1) throw new ArgError(`body, json and form exclude each other (got ${bodies.join(" and ")})`, [bodies[1]]);
  if (args.content_type !== undefined && args.body === undefined) throw new ArgError("content_type goes with body (json and form set their own)", ["content_type"]);
  const problem = durationProblem("timeout", args.timeout, 1, 600_000);
  if (problem !== null) throw new ArgError(problem, ["timeout"]);
  const url = compileUrl(set, args.url);
  const query = Object.entries(args.query_params ?? {}).map(([k, v]): [string, Template] => [k, set.compile(v, ["query_params", k])]);
  const headers = Object.entries(args.headers ?? {}).map(([name, v]): [string, Template] => {
    if (!TOKEN.test(name)) throw new ArgError(`'${name}' is not a header name`, ["headers", name]);
    if (OWN_HEADERS.has(name.toLowerCase())) throw new ArgError(`${name} is set by the client itself`, ["headers", name]);
    const t = set.compile(v, ["headers", name]);
    if (t.constant !== null) {
      try {
        validateHeaderValue(name, t.constant);
      } catch {
        throw new ArgError(`the value of ${name} has characters a header cannot carry`, ["headers", name]);
      }
    }
    return [name, t];
  });
  let body: Body | null = null;
  let contentType: string | null = null;
  if (args.body !== undefined) {
    body = { kind: "raw", template: set.compile(args.body, ["body"]) };
    contentType = args.content_type ?? null;
  } else if (args.json !== undefined) {
    body = { kind: "json", template: compileJson(set, args.json) };
    contentType = "application/json";
  } else if (args.form !== undefined) {
    body = { kind: "form", fields: Object.entries(args.form).map(([k, v]): [string, Template] => [k, set.compile(v, ["form", k])]) };
    contentType = "application/x-www-form-urlencoded";
  }
  let socks5: string | null = null;
  if (args.socks5 !== undefined) {
    try {
      parseSocks5(args.socks5);
    } catch (err) {
      throw new ArgError((err as Error).message, ["socks5"]);
    }
    socks5 = args.socks5;
  }
  const fixedUrl = url.constant !== null && query.length === 0 ? new URL(url.constant) : null;
  return { set, method: args.method.toUpperCase(), url, query, headers, body, contentType, timeoutMs: parseDuration(args.timeout), socks5, fixedUrl };
}

export function checkRequest(args: HttpRequestArgs, env: CheckEnv): ArgProblem[] {
  const problems: ArgProblem[] = [];
  try {
    compileRequest(args);
  } catch (err) {
    if (!(err instanceof ArgError)) throw err;
    problems.push({ path: err.path, message: err.message });
  }
  const outbound = args.outbound === undefined ? null : env.outboundProblem(args.outbound);
  if (outbound !== null) problems.push({ path: ["outbound"], message: outbound });
  return problems;
}

/** The request for one query's captured values (built when it is sent). */
export function buildRequest(c: CompiledRequest, values: readonly string[]): SendRequest {
  // A URL without keys or query_params is parsed once (the client never changes it).
  const url = c.fixedUrl ?? new URL(render(c.url, values, urlValue));
  for (const [k, t] of c.query) url.searchParams.append(k, render(t, values));
  const headers: OutgoingHttpHeaders = { "user-agent": `sluice/${VERSION}` };
  let typed = false;
  for (const [name, t] of c.headers) {
    const value = render(t, values);
    if (t.constant === null) {
      try {
        validateHeaderValue(name, value);
      } catch {
        throw new HookError(`the header ${name} would carry characters a header cannot (from a template value)`, "invalid");
      }
    }
    const lower = name.toLowerCase();
    if (lower === "user-agent") delete headers["user-agent"];
    if (lower === "content-type") typed = true;
    headers[name] = value;
  }
  if (c.contentType !== null && !typed) headers["content-type"] = c.contentType;
  let body: Buffer | null = null;
  if (c.body?.kind === "form") body = Buffer.from(new URLSearchParams(c.body.fields.map(([k, t]): [string, string] => [k, render(t, values)])).toString());
  else if (c.body?.kind === "json") body = Buffer.from(render(c.body.template, values, jsonValue));
  else if (c.body) body = Buffer.from(render(c.body.template, values));
  return { method: c.method, url, headers, body };
}
