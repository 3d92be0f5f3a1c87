// The global observability routes over a real HTTP listener: Prometheus metrics (process and DNS
// server families, low-cardinality labels only), the actor list across a reload, the OpenAPI
// document against the routes fastify really serves, and the one JSON error shape.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { apiYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(apiYaml("reject REFUSED"));
});
afterAll(() => s.stop());

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Actor {
  id: string;
  parent: string | null;
  status: string;
  state: unknown;
}

async function actors(): Promise<Actor[]> {
  const res = await s.api("/api/actors");
  expect(res.status).toBe(200);
  const body = (await res.json()) as { ok: boolean; actors: Actor[] };
  expect(body.ok).toBe(true);
  return body.actors;
}

/** Label names and values of every sample line of `family` in a Prometheus text body. */
function samples(text: string, family: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    const m = new RegExp(`^${family}(?:\\{(.*)\\})? (\\S+)$`).exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[1] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    out.push({ labels, value: Number(m[2]) });
  }
  return out;
}

/** (method, path) of every route in fastify's printRoutes() tree, without HEAD. */
function routesFromTree(tree: string): string[] {
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split("\n")) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    stack.length = (m[1]).length / 4;
    stack.push(m[2]);
    const path = stack.join("");
    for (const method of (m[3] ?? "").split(", ").filter((x) => x && x !== "HEAD")) out.push(`${method} ${path}`);
  }
  return out;
}

test("GET /api/metrics: Prometheus text with process metrics and per-server counters labelled plugin_tag/protocol only", async () => {
  const secretName = `very-distinctive-qname-${Date.now()}.example`;
  for (let i = 0; i < 5; i++) expect(rcodeOf(await query(s.udpPort, `${i}.${secretName}`, "A"))).toBe(5);
  expect(rcodeOf(await query(s.tcpPort, secretName, "AAAA", { tcp: true }))).toBe(5);

  const res = await s.api("/api/metrics");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  const text = await res.text();
  expect(() => JSON.parse(text) as unknown).toThrow();
  expect(text).toContain("# TYPE process_cpu_user_seconds_total counter");
  expect(samples(text, "process_cpu_user_seconds_total")[0]?.value).toBeGreaterThan(0);
  expect(samples(text, "nodejs_heap_size_used_bytes")[0]?.value).toBeGreaterThan(0);

  expect(text).toContain("# TYPE server_request_total counter");
  const requests = samples(text, "server_request_total");
  expect(requests.find((r) => r.labels.plugin_tag === "udp")).toEqual({ labels: { plugin_tag: "udp", protocol: "udp" }, value: 5 });
  expect(requests.find((r) => r.labels.plugin_tag === "tcp")).toEqual({ labels: { plugin_tag: "tcp", protocol: "tcp" }, value: 1 });
  for (const family of ["server_request_total", "server_completed_total", "server_inflight"]) {
    for (const sample of samples(text, family)) expect(Object.keys(sample.labels).sort(), family).toEqual(["plugin_tag", "protocol"]);
  }
  // no query name and no client address anywhere in the exposition
  expect(text).not.toContain("distinctive");
  expect(text).not.toContain("example");
  expect(text).not.toContain("127.0.0.1");
});

test("GET /api/actors: app serving, the config actor, runtime:<n> with its plugin children; a reload replaces the runtime", async () => {
  const before = await actors();
  const ids = before.map((a) => a.id);
  expect(before.find((a) => a.id === "app")).toMatchObject({ parent: null, status: "active", state: { running: "serving" } });
  expect(before.find((a) => a.id === "config")).toMatchObject({ parent: "app", status: "active", state: "idle" });
  const runtimes = before.filter((a) => /^runtime:\d+$/.test(a.id));
  expect(runtimes).toHaveLength(1);
  const runtime = runtimes[0];
  const n = Number(runtime.id.split(":")[1]);
  expect(runtime).toMatchObject({ parent: "app", state: "active" });
  for (const tag of ["main", "udp", "tcp"]) {
    expect(before.find((a) => a.id === `runtime:${n}/plugin:${tag}`)).toMatchObject({ parent: runtime.id, status: "active", state: "ready" });
  }
  expect(ids.filter((id) => id.startsWith(`runtime:${n}/`))).toHaveLength(3);

  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  const deadline = Date.now() + 10_000;
  let after = await actors();
  while (!after.some((a) => a.id === `runtime:${n + 1}` && a.state === "active") || after.some((a) => a.id === `runtime:${n}` || a.id.startsWith(`runtime:${n}/`))) {
    if (Date.now() > deadline) throw new Error(`runtime did not switch: ${JSON.stringify(after.map((a) => [a.id, a.state]))}`);
    await sleep(20);
    after = await actors();
  }
  expect(after.find((a) => a.id === `runtime:${n + 1}/plugin:main`)).toMatchObject({ state: "ready" });
  expect(after.find((a) => a.id === "app")).toMatchObject({ state: { running: "serving" } });
  const status = (await (await s.api("/api/reload/status")).json()) as { status: string };
  expect(status.status).toBe("ok");
});

test("GET /api/openapi.json: an OpenAPI 3 document covering every /api route, each with a summary and tags", async () => {
  const res = await s.api("/api/openapi.json");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const doc = (await res.json()) as { openapi: string; info: { title: string; version: string }; paths: Record<string, Record<string, Record<string, unknown>>> };
  expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
  expect(typeof doc.info.title).toBe("string");
  expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+/);

  const documented = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    expect(path.startsWith("/api/"), path).toBe(true);
    const pathParams = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      documented.add(where);
      expect(["get", "post", "put", "delete", "patch"], where).toContain(method);
      expect(typeof op.summary === "string" && op.summary.length > 0, where).toBe(true);
      expect(Array.isArray(op.tags) && op.tags.length > 0 && op.tags.every((t) => typeof t === "string"), where).toBe(true);
      const responses = op.responses as Record<string, { description?: unknown }>;
      expect(Object.keys(responses).some((k) => /^2\d\d$/.test(k)), where).toBe(true);
      for (const [code, r] of Object.entries(responses)) {
        expect(code, where).toMatch(/^[1-5]\d\d$/);
        expect(typeof r.description, where).toBe("string");
      }
      const params = (op.parameters ?? []) as { name: string; in: string; schema?: unknown }[];
      for (const p of params) {
        expect(["query", "path"], where).toContain(p.in);
        expect(p.schema, where).toBeDefined();
      }
      expect(params.filter((p) => p.in === "path").map((p) => p.name).sort(), where).toEqual([...pathParams].sort());
    }
  }

  const served = routesFromTree((s.app.apiServer as NonNullable<typeof s.app.apiServer>).fastify.printRoutes({ commonPrefix: false }))
    .filter((r) => r.split(" ")[1]?.startsWith("/api/"))
    .map((r) => r.replace(/:(\w+)/g, "{$1}"));
  for (const known of ["GET /api/logs", "GET /api/logs/stream", "GET /api/metrics", "GET /api/actors", "GET /api/openapi.json", "POST /api/reload", "GET /api/healthz"]) {
    expect(served).toContain(known);
  }
  // A GET on a path served only by other methods answers 405 naming them (no GET changes state); those
  // answers are not operations, so they are left out of the document: each has a documented sibling.
  const methodNotAllowed = served.filter((r) => r.startsWith("GET ") && !documented.has(r));
  for (const r of methodNotAllowed) expect([...documented].some((d) => d !== r && d.endsWith(` ${r.slice(4)}`)), r).toBe(true);
  expect(methodNotAllowed).toContain("GET /api/plugins/{tag}/flush");
  expect([...documented].sort()).toEqual([...new Set(served)].filter((r) => !methodNotAllowed.includes(r)).sort());
  const logs = doc.paths["/api/logs"]?.get as { parameters: { name: string; schema: { maximum?: number; enum?: string[] } }[] };
  expect(logs.parameters.find((p) => p.name === "limit")?.schema.maximum).toBe(1000);
  expect(logs.parameters.find((p) => p.name === "level")?.schema.enum).toContain("warning");
});

test("every route's request and response schemas compile (they are compiled on first use, so a broken one would otherwise wait for its first request)", () => {
  const schemas = (s.app.apiServer as NonNullable<typeof s.app.apiServer>).schemas;
  expect(schemas.compileAll()).toBeGreaterThan(100);
  expect(schemas.compileAll()).toBe(0);
});

test("errors: unknown routes, bad queries, bad JSON bodies and refused content types all answer {ok:false, code, message}", async () => {
  const shape = async (res: Response, status: number, code: string): Promise<string> => {
    expect(res.status, `${res.url} ${code}`).toBe(status);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort(), res.url).toEqual(["code", "message", "ok"]);
    expect(body).toMatchObject({ ok: false, code });
    expect(typeof body.message === "string" && body.message.length > 0).toBe(true);
    return body.message as string;
  };

  expect(await shape(await s.api("/api/no/such/route"), 404, "not_found")).toContain("/api/no/such/route");
  await shape(await s.api("/api/logs", { method: "DELETE" }), 404, "not_found");
  await shape(await s.api("/api"), 404, "not_found");

  // every documented integer query parameter of a route without path parameters rejects a non-number
  const doc = (await (await s.api("/api/openapi.json")).json()) as { paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: { type?: string } }[] }>> };
  const probed: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    if (path.includes("{") || !item.get) continue;
    for (const p of item.get.parameters ?? []) {
      if (p.in !== "query" || p.schema.type !== "integer") continue;
      probed.push(`${path}?${p.name}`);
      expect(await shape(await s.api(`${path}?${p.name}=not-a-number`, { headers: { accept: "text/event-stream" } }), 400, "invalid_query")).toContain(p.name);
    }
  }
  expect(probed).toEqual(expect.arrayContaining(["/api/logs?limit", "/api/logs/stream?tail"]));
  await shape(await s.api("/api/logs?level=chatty"), 400, "invalid_query");
  await shape(await s.api("/api/logs/stream?level=chatty"), 400, "invalid_query");

  // a broken JSON body is refused before the handler runs: no reload, no shutdown
  const reloadsBefore = (await (await s.api("/api/reload/status")).json()) as { last_started_ms: number | null };
  for (const path of ["/api/reload", "/api/shutdown"]) {
    await shape(await s.api(path, { method: "POST", headers: { "content-type": "application/json" }, body: '{"oops": ' }), 400, "invalid_request");
  }
  await sleep(100);
  expect(((await (await s.api("/api/reload/status")).json()) as { last_started_ms: number | null }).last_started_ms).toBe(reloadsBefore.last_started_ms);
  expect(((await (await s.api("/api/control")).json()) as { status: string }).status).toBe("running");

  await shape(await s.api("/api/logs/stream", { headers: { accept: "application/json" } }), 406, "not_acceptable");
});
