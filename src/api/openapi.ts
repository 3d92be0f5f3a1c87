// GET /api/openapi.json: an OpenAPI 3.0 document built from the routes' own schemas (the ones
// fastify validates requests with), so the document cannot drift from the code.

import type { RouteOptions } from "fastify";
import { VERSION } from "../version.js";
import { errorSchema } from "./errors.js";

declare module "fastify" {
  interface FastifySchema {
    summary?: string;
    description?: string;
    tags?: string[];
    /** Left out of the document (the GET → 405 answers of state-changing plugin routes). */
    hide?: boolean;
  }
}

type Json = Record<string, unknown>;

function toOpenApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
}

function parameters(schema: Json | undefined, where: "query" | "path"): Json[] {
  const props = (schema?.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema?.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === "path" || required.has(name),
    schema: s,
    ...(typeof s.description === "string" ? { description: s.description } : {}),
  }));
}

function responseFor(status: string, schema: Json | undefined): Json {
  const text = schema?.type === "string";
  const description = status.startsWith("2") ? "Success" : status === "401" ? "Missing or wrong credentials" : "Error";
  if (!schema) return { description };
  return { description, content: { [text ? "text/plain" : "application/json"]: { schema } } };
}

const ROLE_TEXT: Record<string, string> = {
  public: "No credentials needed.",
  metrics: "Role: metrics (or above).",
  viewer: "Role: viewer (or above).",
  operator: "Role: operator (or admin).",
  admin: "Role: admin.",
};

/** Credentials the API takes when it asks for them: Basic users, Bearer tokens, the dashboard's session cookie. */
const SECURITY_SCHEMES = {
  basic: { type: "http", scheme: "basic" },
  bearer: { type: "http", scheme: "bearer", description: "An API token from POST /api/tokens (slc_…)" },
  session: { type: "apiKey", in: "cookie", name: "sluice_session_<port>", description: "Set by POST /api/session; named for the listener's port" },
};

export function buildOpenApi(routes: RouteOptions[], authRequired: boolean): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    if ((route.schema as Json | undefined)?.hide === true) continue;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = (route.schema ?? {}) as Json;
    const responses: Json = {};
    for (const [status, s] of Object.entries((schema.response ?? {}) as Record<string, Json>)) responses[status] = responseFor(status, s);
    if (!responses["200"] && !Object.keys(responses).some((k) => k.startsWith("2"))) responses["200"] = { description: "Success" };
    responses["400"] ??= responseFor("400", errorSchema);
    const role = typeof schema.role === "string" ? schema.role : undefined;
    if (authRequired && role !== "public") responses["401"] = responseFor("401", errorSchema);
    if (role !== undefined && role !== "public" && role !== "metrics") responses["403"] ??= { description: "The caller's role (or token scopes) does not reach this route: forbidden_role, forbidden_scope", content: { "application/json": { schema: errorSchema } } };
    for (const method of methods) {
      const op: Json = {
        summary: schema.summary ?? `${method} ${route.url}`,
        tags: schema.tags ?? [],
        parameters: [...parameters(schema.querystring as Json | undefined, "query"), ...parameters(schema.params as Json | undefined, "path")],
        responses,
      };
      const roleText = role === undefined ? undefined : ROLE_TEXT[role];
      const description = [schema.description, roleText].filter((d): d is string => typeof d === "string" && d !== "").join("\n\n");
      if (description) op.description = description;
      if (role !== undefined) op["x-sluice-role"] = role;
      if (role === "public") op.security = [];
      if (schema.body) op.requestBody = { content: { "application/json": { schema: schema.body } } };
      (paths[toOpenApiPath(route.url)] ??= {})[method.toLowerCase()] = op;
    }
  }
  return {
    openapi: "3.0.3",
    info: { title: "Sluice management API", version: VERSION },
    servers: [{ url: "/" }],
    components: { securitySchemes: SECURITY_SCHEMES },
    ...(authRequired ? { security: [{ basic: [] }, { bearer: [] }, { session: [] }] } : {}),
    paths,
  };
}
