// Plugin routes over the real API and real DNS, on one Sluice with Basic auth: provider reload (one
// at a time, shared with `reload_provider` in a pipeline), reverse_lookup, the plugin listing, actors
// and OpenAPI, routes that follow a reload which removes and adds plugins, auth, and the control
// routes' answers while the application is shutting down.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { decodeMessage } from "../../src/dns/message.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { answerIps, query, buildQuery, rcodeOf, udpExchange } from "../helpers/dns.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

const LINES = 300_000;
const AUTH = { authorization: `Basic ${Buffer.from("admin:s3cret").toString("base64")}` };
const bigList = (extra: string[] = []): string => Array.from({ length: LINES }, (_, i) => `full:n${i}.big.test`).concat(extra).join("\n") + "\n";

/** Configuration A has plugins x (cache) and m (matcher); B replaces them with y and n. */
function config(variant: "A" | "B", upstream: number, udp = "127.0.0.1:0"): string {
  const [cache, matcher] = variant === "A" ? ["x", "m"] : ["y", "n"];
  return `
api:
  http:
    listen: "127.0.0.1:0"
    auth: { type: basic, username: admin, password: s3cret }
plugins:
  - { tag: big, type: domain_set, args: { files: [big.txt] } }
  - { tag: ${cache}, type: cache, args: { size: 1000 } }
  - { tag: ${matcher}, type: qname, args: ["domain:blocked.test"] }
  - { tag: rl, type: reverse_lookup }
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:reload.trigger", exec: "reload_provider $big" }
      - { matches: "qname full:reload.trigger", exec: reject 5 }
      - { matches: "qname full:hold.test", exec: sleep 1500 }
      - { matches: "qname full:hold.test", exec: reject 4 }
      - { matches: "qname $big", exec: reject 3 }
      - { matches: $${matcher}, exec: reject 5 }
      - exec: $${cache}
      - exec: $rl
      - exec: forward 127.0.0.1:${upstream}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "${udp}" } }
`;
}

let up: Responder;
let s: RunningSluice;
beforeAll(async () => {
  up = await startResponder((q) => answerWith(q, q.questions[0].name.toLowerCase() === "host.rl.test" ? ["192.0.2.55", "2001:db8::55"] : ["192.0.2.1"], 600));
  s = await startSluice(config("A", up.port), { "big.txt": bigList() });
});
afterAll(async () => {
  await s.stop();
  await up.close();
});

interface Reply {
  status: number;
  type: string;
  text: string;
  json: Record<string, unknown>;
}

async function call(path: string, init: RequestInit = {}, auth = true): Promise<Reply> {
  const res = await s.api(path, { ...init, headers: { ...(auth ? AUTH : {}), ...(init.headers as Record<string, string> | undefined) } });
  const text = await res.text();
  const type = res.headers.get("content-type") ?? "";
  return { status: res.status, type, text, json: type.startsWith("application/json") ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const post = (path: string): Promise<Reply> => call(path, { method: "POST" });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it is true (or throws after `timeoutMs`). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const rcode = async (name: string): Promise<number> => rcodeOf(await query(s.udpPort, name, "A", { timeoutMs: 5000 }));

interface ActorRow {
  id: string;
  state: unknown;
  context: Record<string, unknown>;
}
async function actors(): Promise<ActorRow[]> {
  return (await call("/api/actors")).json.actors as ActorRow[];
}
async function actor(suffix: string): Promise<ActorRow | undefined> {
  return (await actors()).find((a) => a.id === `runtime:${s.app.generation}/${suffix}`);
}
const providerState = async (): Promise<unknown> => (await actor("plugin:big/provider:big"))?.state;
const untilReloading = (): Promise<void> => until("the provider to be reloading", async () => (await providerState()) === "reloading");

test("two concurrent provider reloads: exactly one 200 with the new rule count, one 409 provider_reload_busy", async () => {
  expect(await rcode("added.test")).toBe(RCODE.NOERROR);
  writeFileSync(join(s.dir, "big.txt"), bigList(["full:added.test"]));
  const [a, b] = await Promise.all([post("/api/plugins/big/reload"), post("/api/plugins/big/reload")]);
  const [ok, busy] = a.status === 200 ? [a, b] : [b, a];
  expect(ok.status).toBe(200);
  expect(ok.json).toEqual({ ok: true, provider: "big", rules: LINES + 1, duration_ms: expect.any(Number) as number });
  expect(ok.json.duration_ms).toBeGreaterThanOrEqual(0);
  expect([busy.status, busy.json]).toEqual([409, { ok: false, code: "provider_reload_busy", message: expect.any(String) as string }]);
  expect(await rcode("added.test")).toBe(RCODE.NXDOMAIN);
  expect((await actor("plugin:big/provider:big"))?.context).toMatchObject({ reloads: 1, failures: 0, rules: LINES + 1, last_error: null });
});

test("a reload whose file is now broken: 400 provider_reload_failed, and DNS answers from the old rules", async () => {
  writeFileSync(join(s.dir, "big.txt"), bigList(["full:later.test", "nokind:broken.test"]));
  const r = await post("/api/plugins/big/reload");
  expect([r.status, r.json.ok, r.json.code]).toEqual([400, false, "provider_reload_failed"]);
  expect(r.json.message).toMatch(/nokind/);
  expect(await rcode("added.test")).toBe(RCODE.NXDOMAIN);
  expect(await rcode("n299999.big.test")).toBe(RCODE.NXDOMAIN);
  expect(await rcode("later.test")).toBe(RCODE.NOERROR);
  expect((await actor("plugin:big/provider:big"))?.context).toMatchObject({ reloads: 1, failures: 1, rules: LINES + 1, last_error: expect.stringMatching(/nokind/) as string });
  writeFileSync(join(s.dir, "big.txt"), bigList());
});

test("reload of a tag that is not a loaded provider, or of no plugin at all: 404 provider_not_found", async () => {
  for (const tag of ["main", "x", "m", "udp", "nope"]) {
    const r = await post(`/api/plugins/${tag}/reload`);
    expect([r.status, r.json.code], tag).toEqual([404, "provider_not_found"]);
  }
});

test("reload_provider in a pipeline and an API reload never run together: whichever comes second is refused", async () => {
  const errors = async (): Promise<number> => Number(/reload_provider_reload_error_total\{plugin_tag="[^"]+"\} (\d+)/.exec(await s.app.services.metrics.text())?.[1] ?? 0);
  const reloads = async (): Promise<number> => (await actor("plugin:big/provider:big"))?.context.reloads as number;
  const start = await reloads();
  const failedBefore = await errors();

  // The API first: a query that asks for a reload meanwhile fails at once (SERVFAIL), it is not queued.
  const api = post("/api/plugins/big/reload");
  await untilReloading();
  expect(await rcode("reload.trigger")).toBe(RCODE.SERVFAIL);
  expect(await providerState()).toBe("reloading");
  expect((await api).status).toBe(200);
  expect(await errors()).toBe(failedBefore + 1);
  expect(await reloads()).toBe(start + 1);

  // The pipeline first: an API reload meanwhile is 409; the query's reload then completes (REFUSED is its answer).
  const query = udpExchange(s.udpPort, buildQuery("reload.trigger", "A"), 15_000);
  await untilReloading();
  const refused = await post("/api/plugins/big/reload");
  expect([refused.status, refused.json.code]).toEqual([409, "provider_reload_busy"]);
  const answer = await query;
  expect(answer).not.toBeNull();
  expect(rcodeOf(decodeMessage(answer as Buffer))).toBe(5);
  expect(await reloads()).toBe(start + 2);
  expect(await errors()).toBe(failedBefore + 1);
  expect(await providerState()).toBe("idle");
});

test("reverse_lookup: a hit is the text/plain FQDN, a miss an empty 200, a missing or bad ip 400 invalid_ip", async () => {
  expect(answerIps(await query(s.udpPort, "Host.RL.test"))).toEqual(["192.0.2.55", "2001:db8::55"]);
  for (const ip of ["192.0.2.55", "2001:db8::55", "2001:DB8:0:0:0:0:0:55", "::ffff:192.0.2.55"]) {
    const hit = await call(`/api/plugins/rl?ip=${encodeURIComponent(ip)}`);
    expect([hit.status, hit.type, hit.text], ip).toEqual([200, "text/plain; charset=utf-8", "host.rl.test."]);
  }
  const miss = await call("/api/plugins/rl?ip=192.0.2.200");
  expect([miss.status, miss.text]).toEqual([200, ""]);
  for (const q of ["", "?ip=", "?ip=not-an-ip", "?ip=192.0.2.256", "?ip=host.rl.test", `?ip=${"1".repeat(100)}`]) {
    const bad = await call(`/api/plugins/rl${q}`);
    expect([bad.status, bad.json.ok, bad.json.code], q).toEqual([400, false, "invalid_ip"]);
  }
  expect((await call("/api/plugins/x?ip=192.0.2.55")).json.code).toBe("plugin_route_not_found");
});

test("GET /api/plugins, /api/actors and /api/openapi.json show the plugins, their actors and their routes", async () => {
  const listing = (await call("/api/plugins")).json as { ok: boolean; plugins: { tag: string; type: string; kind: string; state: string; routes: string[] }[] };
  expect(listing.ok).toBe(true);
  const byTag = new Map(listing.plugins.map((p) => [p.tag, p]));
  expect([...byTag.keys()].sort()).toEqual(["big", "m", "main", "rl", "udp", "x"]);
  expect(byTag.get("x")).toMatchObject({
    type: "cache",
    kind: "executor",
    state: "ready",
    routes: ["GET /api/plugins/x/entries", "DELETE /api/plugins/x/entries/:id", "POST /api/plugins/x/flush", "GET /api/plugins/x/dump", "POST /api/plugins/x/load_dump"],
  });
  expect(byTag.get("m")).toMatchObject({ type: "qname", kind: "matcher", state: "ready", routes: ["GET /api/plugins/m/status", "POST /api/plugins/m/mode"] });
  expect(byTag.get("big")).toMatchObject({ type: "domain_set", kind: "provider", state: "ready", routes: ["POST /api/plugins/big/reload", "GET /api/plugins/big/reload/status"] });
  expect(byTag.get("rl")).toMatchObject({ type: "reverse_lookup", kind: "executor", routes: ["GET /api/plugins/rl"] });
  expect(byTag.get("main")).toMatchObject({ kind: "executor", routes: [] });

  const g = s.app.generation;
  const states = new Map((await actors()).map((a) => [a.id, a.state]));
  for (const tag of ["big", "x", "m", "rl", "main", "udp"]) expect(states.get(`runtime:${g}/plugin:${tag}`), tag).toBe("ready");
  expect(states.get(`runtime:${g}/plugin:big/provider:big`)).toBe("idle");
  expect(states.get(`runtime:${g}/plugin:x/cache:x`)).toEqual({ running: { ops: "idle", saver: "off", sweeper: "waiting" } });
  expect(states.get(`runtime:${g}/plugin:m/matcher:m`)).toBe("normal");
  expect([...states.keys()].filter((id) => id.startsWith(`runtime:${g}/plugin:rl/`))).toEqual([]);
  // The matcher's state follows a mode change.
  expect((await call("/api/plugins/m/mode", { method: "POST", body: JSON.stringify({ mode: "always_true" }), headers: { "content-type": "application/json" } })).status).toBe(200);
  expect((await actor("plugin:m/matcher:m"))?.state).toEqual({ always_true: "held" });
  expect(await rcode("anything.test")).toBe(5);
  await call("/api/plugins/m/mode", { method: "POST", body: JSON.stringify({ mode: "normal" }), headers: { "content-type": "application/json" } });

  const paths = (await call("/api/openapi.json")).json.paths as Record<string, Record<string, unknown>>;
  const want: [string, string][] = [
    ["/api/plugins", "get"],
    ["/api/plugins/{tag}/entries", "get"],
    ["/api/plugins/{tag}/entries/{id}", "delete"],
    ["/api/plugins/{tag}/flush", "post"],
    ["/api/plugins/{tag}/dump", "get"],
    ["/api/plugins/{tag}/load_dump", "post"],
    ["/api/plugins/{tag}/status", "get"],
    ["/api/plugins/{tag}/mode", "post"],
    ["/api/plugins/{tag}/reload", "post"],
    ["/api/plugins/{tag}", "get"],
  ];
  for (const [path, method] of want) expect(paths[path]?.[method], `${method} ${path}`).toBeDefined();
  // The GET → 405 answers of state-changing routes are not operations.
  for (const path of ["/api/plugins/{tag}/flush", "/api/plugins/{tag}/reload", "/api/plugins/{tag}/mode", "/api/plugins/{tag}/load_dump"]) expect(paths[path]?.get, path).toBeUndefined();
  expect(Object.keys((paths["/api/plugins/{tag}/reload"].post as { responses: object }).responses)).toEqual(expect.arrayContaining(["200", "400", "401", "404", "409"]));
});

test("no GET plugin route changes state: GET on a state-changing route answers 405 naming the method, and changes nothing", async () => {
  // Every plugin type of the build: a route that changes state is never a GET.
  for (const def of createCatalog("full").definitions()) {
    for (const route of def.control?.routes ?? []) expect(route.method === "GET" && route.changesState === true, `${def.type} ${route.path}`).toBe(false);
  }
  await query(s.udpPort, "kept.other.test");
  const entriesBefore = (await call("/api/plugins/x/entries")).json.total_entries as number;
  const reloadsBefore = (await call("/api/plugins/big/reload/status")).json.reloads as number;
  expect(entriesBefore).toBeGreaterThan(0);
  const cases: [string, string][] = [
    ["/api/plugins/x/flush", "POST"],
    ["/api/plugins/x/load_dump", "POST"],
    ["/api/plugins/x/entries/abc", "DELETE"],
    ["/api/plugins/big/reload", "POST"],
    ["/api/plugins/m/mode", "POST"],
  ];
  for (const [path, allow] of cases) {
    const res = await s.api(path, { headers: AUTH });
    expect([res.status, res.headers.get("allow"), await res.json()], path).toEqual([405, allow, { ok: false, code: "method_not_allowed", message: `GET does not change anything here: use ${allow} ${path}` }]);
  }
  // Not a route of that plugin (or no such plugin): still 404.
  for (const path of ["/api/plugins/x/reload", "/api/plugins/big/flush", "/api/plugins/nope/flush"]) {
    const r = await call(path);
    expect([r.status, r.json.code], path).toEqual([404, "plugin_route_not_found"]);
  }
  expect((await call("/api/plugins/x/entries")).json.total_entries).toBe(entriesBefore);
  expect((await call("/api/plugins/big/reload/status")).json.reloads).toBe(reloadsBefore);
  expect((await call("/api/plugins/m/status")).json.mode).toBe("normal");
});

test("with Basic auth configured, plugin routes answer 401 unauthorized without (or with wrong) credentials", async () => {
  const wrong = { authorization: `Basic ${Buffer.from("admin:nope").toString("base64")}` };
  for (const [method, path] of [["GET", "/api/plugins"], ["GET", "/api/plugins/x/entries"], ["POST", "/api/plugins/big/reload"], ["GET", "/api/plugins/rl?ip=192.0.2.55"], ["POST", "/api/plugins/nope/reload"]]) {
    for (const headers of [{}, wrong]) {
      const r = await call(path, { method, headers }, false);
      expect([r.status, r.json], `${method} ${path}`).toEqual([401, { ok: false, code: "unauthorized", message: expect.any(String) as string }]);
    }
  }
});

test("a reload that removes x and m and adds y and n: their routes go and come, while DNS and the API keep answering", async () => {
  const apiPort = s.app.apiServer?.address().port;
  const generation = s.app.generation;
  writeFileSync(join(s.dir, "sluice.yaml"), config("B", up.port, `127.0.0.1:${s.udpPort}`));
  let running = true;
  const dns = { sent: 0, answered: 0 };
  const http = { sent: 0, ok: 0 };
  const dnsLoop = (async () => {
    for (let i = 0; running; i++) {
      dns.sent++;
      const name = i % 2 === 0 ? `n${i}.big.test` : `host${i % 7}.other.test`;
      const raw = await udpExchange(s.udpPort, buildQuery(name, "A"), 3000);
      if (raw !== null) dns.answered++;
    }
  })();
  const apiLoop = (async () => {
    while (running) {
      http.sent++;
      if ((await call("/api/healthz")).status === 200) http.ok++;
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  expect((await post("/api/reload")).status).toBe(202);
  await until("the reload to finish", async () => ["ok", "failed"].includes((await call("/api/reload/status")).json.status as string));
  running = false;
  await Promise.all([dnsLoop, apiLoop]);
  expect((await call("/api/reload/status")).json).toMatchObject({ status: "ok", last_error: null });
  expect(s.app.generation).toBe(generation + 1);
  expect(dns.answered).toBe(dns.sent);
  expect(dns.sent).toBeGreaterThan(10);
  expect(http.ok).toBe(http.sent);
  expect(s.app.apiServer?.address().port).toBe(apiPort);

  for (const [method, path] of [["GET", "/api/plugins/x/entries"], ["POST", "/api/plugins/x/flush"], ["GET", "/api/plugins/m/status"], ["POST", "/api/plugins/m/mode"]]) {
    const r = await call(path, { method, body: method === "POST" ? "{}" : undefined });
    expect([r.status, r.json.code], `${method} ${path}`).toEqual([404, "plugin_route_not_found"]);
  }
  await query(s.udpPort, "cached.other.test");
  const entries = await call("/api/plugins/y/entries?qname=cached.other");
  expect([entries.status, (entries.json.entries as { domain: string }[]).map((e) => e.domain)]).toEqual([200, ["cached.other.test"]]);
  expect((await call("/api/plugins/n/status")).json).toEqual({ ok: true, matcher: "n", mode: "normal", until_ms: null });
  const tags = ((await call("/api/plugins")).json.plugins as { tag: string }[]).map((p) => p.tag).sort();
  expect(tags).toEqual(["big", "main", "n", "rl", "udp", "y"]);
  const ids = (await actors()).map((a) => a.id);
  expect(ids).toContain(`runtime:${generation + 1}/plugin:y/cache:y`);
  expect(ids).toContain(`runtime:${generation + 1}/plugin:n/matcher:n`);
  expect(ids.filter((id) => id.startsWith(`runtime:${generation}/`) || id.includes("plugin:x") || id.includes("plugin:m/"))).toEqual([]);
});

test("while shutting down (an in-flight query keeps the old generation draining): a second shutdown and a restart get 409, a reload 503", async () => {
  const held = udpExchange(s.udpPort, buildQuery("hold.test", "A"), 10_000);
  // The query sleeps 1.5 s in the pipeline; the requests below are sent while it does.
  await sleep(200);
  const first = await post("/api/shutdown");
  expect([first.status, first.json]).toEqual([202, { ok: true, action: "shutdown", status: "accepted" }]);
  expect((await call("/api/control")).json).toMatchObject({ state: "shutting_down", status: "shutdown_requested" });
  const again = await post("/api/shutdown");
  expect([again.status, again.json]).toEqual([409, { ok: false, code: "shutdown_in_progress", message: expect.any(String) as string }]);
  const restart = await post("/api/restart");
  expect([restart.status, restart.json.code]).toEqual([409, "shutdown_in_progress"]);
  const reload = await post("/api/reload");
  expect([reload.status, reload.json.code]).toEqual([503, "shutting_down"]);
  // Still shutting down after all three: the held query had not finished yet.
  expect((await call("/api/control")).json.state).toBe("shutting_down");
  const answer = await held;
  expect(answer === null ? null : rcodeOf(decodeMessage(answer))).toBe(4);
  expect(await s.app.done).toEqual({ restart: false, error: null });
});
