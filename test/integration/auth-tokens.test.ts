// API tokens over a real listener: an admin makes them (the secret shown once, a hash kept in a
// 0600 state file), `Authorization: Bearer` carries them on every route and on event streams; a
// metrics token scrapes metrics and nothing else; a revoked token is refused on its next request and
// its open stream closes within a second; expiry follows the injected clock; route scopes narrow a
// token below any role; tokens survive a restart; bad input gets a code.
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { basic, ROLE_USERS, usersYaml, userOf } from "../helpers/auth.js";
import { openSse, type SseStream } from "../helpers/sse.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

const clock = { ms: 0 };
let yaml: string;
let s: RunningSluice;
const admin = userOf("admin");
const ADMIN = { authorization: basic(admin.name, admin.password) };

beforeAll(async () => {
  yaml = `
api:
  http:
    listen: 127.0.0.1:0
    auth:
${await usersYaml(ROLE_USERS)}
plugins:
  - tag: ads
    type: qname
    args: ["domain:ads.example"]
`;
  s = await startSluice(yaml, {}, { clockShift: clock });
});
afterAll(() => s.stop());

const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });

async function makeToken(body: Record<string, unknown>, headers: Record<string, string> = ADMIN): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await s.api("/api/tokens", { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function secretOf(body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const made = await makeToken(body);
  expect(made.status, JSON.stringify(made.json)).toBe(201);
  return { id: (made.json.token as { id: string }).id, secret: made.json.secret as string };
}

/** Resolves true once the stream has ended (closed by the server), false if it is still open after `ms`. */
async function endsWithin(stream: SseStream, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  try {
    while (Date.now() < deadline) if ((await stream.next(Math.max(1, deadline - Date.now()))) === null) return true;
  } catch (err) {
    // A socket the server destroys ends the body with an error; a timeout means it stayed open.
    return !/no SSE frame/.test((err as Error).message);
  }
  return false;
}

test("a metrics token scrapes /api/metrics and health, and gets 403 forbidden_role on /api/config and every other read", async () => {
  const { secret } = await secretOf({ name: "prometheus", role: "metrics" });
  expect(secret).toMatch(/^slc_[A-Za-z0-9_-]{12}_[A-Za-z0-9_-]{43}$/);
  const metrics = await s.api("/api/metrics", { headers: bearer(secret) });
  expect(metrics.status).toBe(200);
  expect(await metrics.text()).toContain("process_cpu_user_seconds_total");
  expect((await s.api("/api/healthz", { headers: bearer(secret) })).status).toBe(200);
  for (const path of ["/api/config", "/api/plugins", "/api/logs"]) {
    const res = await s.api(path, { headers: bearer(secret) });
    expect(res.status, path).toBe(403);
    expect(await res.json()).toMatchObject({ ok: false, code: "forbidden_role", role: "metrics", role_needed: path === "/api/config" ? "admin" : "viewer" });
  }
});

test("the list shows tokens without secrets and with their last use; only an admin makes or lists them", async () => {
  const { id, secret } = await secretOf({ name: "homepage widget", role: "viewer", expires_in: "30d" });
  await s.api("/api/control", { headers: bearer(secret) });
  const list = (await (await s.api("/api/tokens", { headers: ADMIN })).json()) as { tokens: Record<string, unknown>[] };
  const row = list.tokens.find((t) => t.id === id);
  expect(row).toMatchObject({ name: "homepage widget", role: "viewer", scopes: null, created_by: admin.name, expires_at_ms: expect.any(Number) as number, last_used_at_ms: expect.any(Number) as number });
  expect(JSON.stringify(list)).not.toContain(secret.slice(17));
  const operator = userOf("operator");
  const refused = await makeToken({ name: "mine", role: "admin" }, { authorization: basic(operator.name, operator.password) });
  expect(refused.status).toBe(403);
  expect(refused.json).toMatchObject({ code: "forbidden_role", role_needed: "admin" });
  // A viewer token cannot make a token either (no escalation through tokens).
  expect((await makeToken({ name: "escalate", role: "admin" }, bearer(secret))).status).toBe(403);
});

test("a revoked token is refused on its next request, and its open event stream closes within a second", async () => {
  const { id, secret } = await secretOf({ name: "dashboard tv", role: "viewer" });
  const stream = await openSse(`${s.apiUrl}/api/logs/stream`, bearer(secret));
  expect(stream.response.status).toBe(200);
  await stream.next();
  const other = await openSse(`${s.apiUrl}/api/logs/stream`, ADMIN);
  const revoked = await s.api(`/api/tokens/${id}`, { method: "DELETE", headers: ADMIN });
  expect(revoked.status).toBe(200);
  const t0 = Date.now();
  expect(await endsWithin(stream, 1000)).toBe(true);
  expect(Date.now() - t0).toBeLessThan(1000);
  const next = await s.api("/api/control", { headers: bearer(secret) });
  expect(next.status).toBe(401);
  expect(await next.json()).toEqual({ ok: false, code: "token_revoked", message: "the token was revoked" });
  // Someone else's stream is untouched.
  expect(await endsWithin(other, 200)).toBe(false);
  await other.close();
  expect((await s.api(`/api/tokens/${id}`, { method: "DELETE", headers: ADMIN })).status).toBe(404);
});

test("a stream opened with a token that expires in 90 days stays open (no timer that fires at once)", async () => {
  const { secret } = await secretOf({ name: "long-lived", role: "viewer", expires_in: "90d" });
  const stream = await openSse(`${s.apiUrl}/api/logs/stream`, bearer(secret));
  expect(stream.response.status).toBe(200);
  expect(await endsWithin(stream, 300)).toBe(false);
  await stream.close();
});

test("a token past its expiry (the injected clock) is refused with token_expired", async () => {
  const { secret } = await secretOf({ name: "short", role: "viewer", expires_in: "1h" });
  expect((await s.api("/api/control", { headers: bearer(secret) })).status).toBe(200);
  clock.ms += 3_600_001;
  try {
    const res = await s.api("/api/control", { headers: bearer(secret) });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe("token_expired");
  } finally {
    clock.ms = 0;
  }
});

test("route scopes narrow a token: it reaches exactly the routes named (a tag or any tag), and 403 forbidden_scope elsewhere", async () => {
  const { secret } = await secretOf({ name: "ads switch", scopes: ["GET /api/metrics", "POST /api/plugins/ads/mode", "GET /api/plugins/{tag}/status"] });
  expect((await s.api("/api/metrics", { headers: bearer(secret) })).status).toBe(200);
  const mode = await s.api("/api/plugins/ads/mode", { method: "POST", headers: { ...bearer(secret), "content-type": "application/json" }, body: JSON.stringify({ mode: "always_false", duration: "10m" }) });
  expect(mode.status).toBe(200);
  expect(((await (await s.api("/api/plugins/ads/status", { headers: bearer(secret) })).json()) as { mode: string }).mode).toBe("always_false");
  for (const [method, path] of [
    ["GET", "/api/healthz"],
    ["GET", "/api/config"],
    ["POST", "/api/plugins/other/mode"],
    ["POST", "/api/reload"],
  ] as const) {
    const res = await s.api(path, { method, headers: bearer(secret) });
    expect(res.status, `${method} ${path}`).toBe(403);
    expect(((await res.json()) as { code: string }).code).toBe("forbidden_scope");
  }
  await s.api("/api/plugins/ads/mode", { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ mode: "normal" }) });
});

test("bad token requests: 400 with what is wrong, 409 for a name in use, 404 for an unknown id", async () => {
  const cases: [Record<string, unknown>, number, string][] = [
    [{ name: "x" }, 400, "a role or a list of scopes"],
    [{ name: "x", role: "viewer", scopes: ["GET /api/metrics"] }, 400, "a role or a list of scopes"],
    [{ name: "x", role: "root" }, 400, "body.role"],
    [{ name: "x", scopes: ["GET /api/nothing/here"] }, 400, "reaches no route"],
    [{ name: "x", scopes: ["fetch everything"] }, 400, "is not a route scope"],
    [{ name: "x", role: "viewer", expires_in: "soon" }, 400, "not a duration"],
    [{ name: "x", role: "viewer", expires_at_ms: 1000 }, 400, "expired already"],
    [{ name: "", role: "viewer" }, 400, "body.name"],
    [{ name: "prometheus", role: "viewer" }, 409, "exists"],
  ];
  for (const [body, status, message] of cases) {
    const r = await makeToken(body);
    expect(r.status, JSON.stringify(body)).toBe(status);
    expect(r.json.message, JSON.stringify(body)).toContain(message);
  }
  const unknown = await s.api("/api/tokens/nosuchid", { method: "DELETE", headers: ADMIN });
  expect(unknown.status).toBe(404);
  expect(((await unknown.json()) as { code: string }).code).toBe("token_not_found");
});

test("malformed, unknown and oversized Bearer credentials: 401 with a code each", async () => {
  const tries: [string, string][] = [
    ["Bearer", "invalid_token"],
    ["Bearer not-a-token", "invalid_token"],
    [`Bearer slc_AAAAAAAAAAAA_${"A".repeat(43)}`, "invalid_token"],
    [`Bearer ${"x".repeat(5000)}`, "credentials_too_large"],
  ];
  for (const [authorization, code] of tries) {
    const res = await s.api("/api/healthz", { headers: { authorization } });
    expect(res.status, authorization.slice(0, 30)).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe(code);
  }
});

test("tokens survive a restart; the state file is 0600 and holds hashes, never a secret", async () => {
  const { secret } = await secretOf({ name: "after restart", role: "viewer" });
  const file = join(s.dir, "data", "auth.json");
  expect(statSync(file).mode & 0o777).toBe(0o600);
  const text = readFileSync(file, "utf8");
  expect(text).toContain("after restart");
  expect(text).not.toContain(secret);
  // The random part alone (base64url may itself contain "_"): slc_ + 12-character id + _ = 17 characters.
  expect(text).not.toContain(secret.slice(17));
  const dir = s.dir;
  await s.app.stop();
  s = await startSluice(yaml, {}, { dir, clockShift: clock });
  expect((await s.api("/api/control", { headers: bearer(secret) })).status).toBe(200);
});
