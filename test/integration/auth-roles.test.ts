// The role × route matrix, generated from the OpenAPI document: every route declares its least
// role (x-sluice-role); each role is tried on each route — a role at or above the route's gets past
// authorisation (any answer but 401/403), one below gets 403 forbidden_role naming the role needed,
// no credentials get 401. Requests that would change something carry a body that cannot be parsed
// ("{"), so an allowed one stops at 400 before its handler runs; plugin routes name a tag that does
// not exist (404 after authorisation).
import { request } from "node:http";
import { afterAll, beforeAll, expect, test } from "vitest";
import { ROLES, type Role } from "../../src/registry/roles.js";
import { basic, ROLE_USERS, usersYaml, userOf } from "../helpers/auth.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

interface Operation {
  method: string;
  path: string;
  role: string | undefined;
}

type OpenApi = { paths: Record<string, Record<string, { "x-sluice-role"?: string }>> };

/** Every operation of the document with its declared role. */
export function operationsOf(doc: OpenApi): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, role: op["x-sluice-role"] })));
}

/** Operations that declare no role, or one that is not a role: what the matrix cannot test. */
export function roleProblems(doc: OpenApi): string[] {
  return operationsOf(doc)
    .filter((o) => o.role === undefined || !(o.role === "public" || (ROLES as readonly string[]).includes(o.role)))
    .map((o) => `${o.method} ${o.path}: ${o.role === undefined ? "no x-sluice-role" : `unknown role ${o.role}`}`);
}

let s: RunningSluice;
let doc: OpenApi;
let port: number;

beforeAll(async () => {
  s = await startSluice(`
api:
  http:
    listen: 127.0.0.1:0
    auth:
${await usersYaml(ROLE_USERS)}
plugins: []
`);
  port = Number(new URL(s.apiUrl).port);
  const admin = userOf("admin");
  doc = (await (await s.api("/api/openapi.json", { headers: { authorization: basic(admin.name, admin.password) } })).json()) as OpenApi;
});
afterAll(() => s.stop());

/** Status and error code of one request; an event stream is cut once its head arrives. */
function statusOf(method: string, path: string, authorization: string | null): Promise<{ status: number; code: string | null; body: Record<string, unknown> | null }> {
  const changes = method !== "GET";
  const headers: Record<string, string> = { accept: path.endsWith("/stream") ? "text/event-stream" : "application/json" };
  if (authorization) headers.authorization = authorization;
  if (changes) Object.assign(headers, { "content-type": "application/json", "content-length": "1" });
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers, agent: false }, (res) => {
      if (String(res.headers["content-type"]).startsWith("text/event-stream")) {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, code: null, body: null });
        return;
      }
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let body: Record<string, unknown> | null;
        try {
          body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          body = null;
        }
        resolve({ status: res.statusCode ?? 0, code: typeof body?.code === "string" ? body.code : null, body });
      });
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on("error", reject);
    req.end(changes ? "{" : undefined);
  });
}

/** A concrete path for an OpenAPI path: {tag} names no plugin, other parameters a plausible value. */
const concrete = (path: string): string => path.replace("{tag}", "nosuch").replace(/\{[a-z_]+\}/g, "x1");

test("every route in the OpenAPI document declares a role, and the document says which in words too", () => {
  const ops = operationsOf(doc);
  expect(ops.length).toBeGreaterThan(60);
  expect(roleProblems(doc)).toEqual([]);
  const metrics = doc.paths["/api/metrics"]?.get as { description?: string } | undefined;
  expect(metrics?.description).toContain("Role: metrics");
});

test("the check fails when a route's role is taken away", () => {
  const broken = structuredClone(doc);
  delete broken.paths["/api/plugins/{tag}/mode"]?.post?.["x-sluice-role"];
  expect(roleProblems(broken)).toEqual(["POST /api/plugins/{tag}/mode: no x-sluice-role"]);
});

test("each role against each route: allowed → past authorisation; below → 403 forbidden_role naming the role; no credentials → 401", async () => {
  const failures: string[] = [];
  // Shutdown and restart go last: an admin's request is refused at the body, but keep them away from the others anyway.
  const ops = operationsOf(doc).sort((a, b) => Number(/shutdown|restart/.test(a.path)) - Number(/shutdown|restart/.test(b.path)));
  for (const op of ops) {
    const path = concrete(op.path);
    const needed = op.role as Role | "public";
    const anon = await statusOf(op.method, path, null);
    if (needed === "public" ? anon.status === 401 || anon.status === 403 : anon.status !== 401) failures.push(`${op.method} ${op.path} without credentials: ${anon.status} ${anon.code}`);
    for (const role of ROLES) {
      const u = userOf(role);
      const r = await statusOf(op.method, path, basic(u.name, u.password));
      const allowed = needed === "public" || ROLES.indexOf(role) >= ROLES.indexOf(needed);
      if (allowed && (r.status === 401 || r.status === 403)) failures.push(`${op.method} ${op.path} as ${role}: ${r.status} ${r.code} (needs ${needed})`);
      if (!allowed && (r.status !== 403 || r.code !== "forbidden_role" || r.body?.role_needed !== needed || r.body?.role !== role)) {
        failures.push(`${op.method} ${op.path} as ${role}: ${r.status} ${r.code} ${String(r.body?.role_needed)} (needs ${needed})`);
      }
    }
  }
  expect(failures).toEqual([]);
  // The process is still up: no allowed request ran a handler that stops it.
  const admin = userOf("admin");
  expect((await statusOf("GET", "/api/healthz", basic(admin.name, admin.password))).status).toBe(200);
}, 60_000);

test("the roles the issue names: metrics reads metrics and health only; viewer every read but the configuration file; operator the runtime controls; admin the rest", () => {
  const role = (method: string, path: string): string | undefined => operationsOf(doc).find((o) => o.method === method && o.path === path)?.role;
  expect(["/api/metrics", "/api/healthz", "/api/readyz", "/api/health"].map((p) => role("GET", p))).toEqual(["metrics", "metrics", "metrics", "metrics"]);
  expect(role("GET", "/api/plugins/{tag}/records")).toBe("viewer");
  expect(role("GET", "/api/logs/stream")).toBe("viewer");
  expect(role("GET", "/api/config")).toBe("admin");
  for (const [m, p] of [
    ["POST", "/api/plugins/{tag}/mode"],
    ["POST", "/api/plugins/{tag}/groups/{group}/pause"],
    ["POST", "/api/plugins/{tag}/flush"],
    ["DELETE", "/api/plugins/{tag}/entries/{id}"],
    ["POST", "/api/plugins/{tag}/reload"],
    ["POST", "/api/plugins/{tag}/jobs/{job}/run"],
    ["POST", "/api/plugins/{tag}/download"],
    ["POST", "/api/plugins/{tag}/rules"],
  ] as const) {
    expect(role(m, p), `${m} ${p}`).toBe("operator");
  }
  for (const [m, p] of [
    ["PUT", "/api/config"],
    ["POST", "/api/reload"],
    ["POST", "/api/restart"],
    ["POST", "/api/shutdown"],
    ["POST", "/api/upgrade/apply"],
    ["POST", "/api/tokens"],
    ["GET", "/api/tokens"],
  ] as const) {
    expect(role(m, p), `${m} ${p}`).toBe("admin");
  }
  expect(role("POST", "/api/session")).toBe("public");
});
