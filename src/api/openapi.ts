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

export function buildOpenApi(routes: RouteOptions[], basicAuth: boolean): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    if ((route.schema as Json | undefined)?.hide === true) continue;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = (route.schema ?? {}) as Json;
    const responses: Json = {};
    for (const [status, s] of Object.entries((schema.response ?? {}) as Record<string, Json>)) responses[status] = responseFor(status, s);
    if (!responses["200"] && !Object.keys(responses).some((k) => k.startsWith("2"))) responses["200"] = { description: "Success" };
    responses["400"] ??= responseFor("400", errorSchema);
    if (basicAuth) responses["401"] = responseFor("401", errorSchema);
    for (const method of methods) {
      const op: Json = {
        summary: schema.summary ?? `${method} ${route.url}`,
        tags: schema.tags ?? [],
        parameters: [...parameters(schema.querystring as Json | undefined, "query"), ...parameters(schema.params as Json | undefined, "path")],
        responses,
      };
      if (schema.description) op.description = schema.description;
      if (schema.body) op.requestBody = { content: { "application/json": { schema: schema.body } } };
      (paths[toOpenApiPath(route.url)] ??= {})[method.toLowerCase()] = op;
    }
  }
  return {
    openapi: "3.0.3",
    info: { title: "Sluice management API", version: VERSION },
    servers: [{ url: "/" }],
    ...(basicAuth ? { components: { securitySchemes: { basic: { type: "http", scheme: "basic" } } }, security: [{ basic: [] }] } : {}),
    paths,
  };
}
