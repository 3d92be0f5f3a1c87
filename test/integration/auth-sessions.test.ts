// Dashboard sessions over a real listener: POST /api/session sets an HttpOnly, SameSite=Strict
// cookie named for the listener's port (Secure over TLS); the cookie then authenticates with the
// user's current role; idle and absolute lifetimes follow the injected clock; DELETE signs out; a
// cookie from another listener is refused; the Origin check guards cookie-authenticated writes; a
// user removed by a reload loses its sessions; an unknown user costs what a wrong password costs.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { basic, fastHash, ROLE_USERS, usersYaml, userOf } from "../helpers/auth.js";
import { rawRequest } from "../helpers/http.js";
import { makePki, requireOpenssl } from "../helpers/pki.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

const clock = { ms: 0 };
let s: RunningSluice;
let port: number;
let yaml: (users: string) => string;
let usersText: string;

beforeAll(async () => {
  usersText = await usersYaml(ROLE_USERS);
  yaml = (users) => `
api:
  http:
    listen: 127.0.0.1:0
    auth:
${users}
      session: { idle: 30m, absolute: 8h }
plugins:
  - tag: ads
    type: qname
    args: ["domain:ads.example"]
`;
  s = await startSluice(yaml(usersText), {}, { clockShift: clock });
  port = Number(new URL(s.apiUrl).port);
});
afterAll(() => s.stop());

const cookieName = (): string => `sluice_session_${port}`;

async function signIn(username: string, password: string, at: RunningSluice = s): Promise<{ status: number; cookie: string | null; setCookie: string | null; json: Record<string, unknown> }> {
  const res = await at.api("/api/session", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username, password }) });
  const setCookie = res.headers.get("set-cookie");
  return { status: res.status, setCookie, cookie: setCookie?.split(";")[0] ?? null, json: (await res.json()) as Record<string, unknown> };
}

const withCookie = (cookie: string, extra: Record<string, string> = {}): Record<string, string> => ({ cookie, ...extra });

test("signing in sets an HttpOnly, SameSite=Strict cookie for /api named for this listener; the cookie then is the user with its role", async () => {
  const vera = userOf("viewer");
  const r = await signIn(vera.name, vera.password);
  expect(r.status).toBe(200);
  expect(r.setCookie).toMatch(new RegExp(`^${cookieName()}=[A-Za-z0-9_-]{43}; Path=/api; HttpOnly; SameSite=Strict; Max-Age=28800$`));
  expect(r.json).toMatchObject({ ok: true, session: { user: vera.name, role: "viewer", idle_timeout_ms: 1_800_000 } });
  const me = (await (await s.api("/api/session", { headers: withCookie(r.cookie ?? "") })).json()) as Record<string, unknown>;
  expect(me).toMatchObject({ ok: true, auth_required: true, principal: { kind: "user", name: vera.name, role: "viewer", via: "session", scopes: null } });
  expect((await s.api("/api/plugins", { headers: withCookie(r.cookie ?? "") })).status).toBe(200);
  const write = await s.api("/api/reload", { method: "POST", headers: withCookie(r.cookie ?? "") });
  expect(write.status).toBe(403);
  expect(await write.json()).toMatchObject({ code: "forbidden_role", role: "viewer", role_needed: "admin" });
});

test("a wrong password or an unknown user is 401 unauthorized, the same answer for both", async () => {
  const wrong = await signIn("vera", "nope");
  const unknown = await signIn("nobody", "nope");
  expect([wrong.status, unknown.status]).toEqual([401, 401]);
  expect(wrong.json).toEqual(unknown.json);
  expect(wrong.setCookie).toBeNull();
});

test("idle and absolute lifetimes follow the clock: 401 session_expired", async () => {
  const otto = userOf("operator");
  const idle = await signIn(otto.name, otto.password);
  const live = await signIn(otto.name, otto.password);
  try {
    // 20 minutes pass four times; `live` is used each time, `idle` is not.
    for (let i = 0; i < 4; i++) {
      clock.ms += 20 * 60_000;
      expect((await s.api("/api/control", { headers: withCookie(live.cookie ?? "") })).status).toBe(200);
    }
    const res = await s.api("/api/control", { headers: withCookie(idle.cookie ?? "") });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { code: string }).code).toBe("session_expired");
    // Past the absolute lifetime (8 h from sign-in), even a session in use ends: the first refusal says so.
    let refused: { at: number; code: string } | null = null;
    for (let i = 5; i <= 30 && refused === null; i++) {
      clock.ms += 20 * 60_000;
      const res = await s.api("/api/control", { headers: withCookie(live.cookie ?? "") });
      if (res.status !== 200) refused = { at: i * 20, code: ((await res.json()) as { code: string }).code };
    }
    // 480 minutes after sign-in plus the milliseconds the test took: just past 8 h.
    expect(refused).toEqual({ at: 480, code: "session_expired" });
  } finally {
    clock.ms = 0;
  }
});

test("signing out clears the cookie and ends the session: the same cookie is then 401 invalid_session", async () => {
  const ada = userOf("admin");
  const r = await signIn(ada.name, ada.password);
  const out = await s.api("/api/session", { method: "DELETE", headers: withCookie(r.cookie ?? "") });
  expect(out.status).toBe(200);
  expect(await out.json()).toEqual({ ok: true, signed_out: true });
  expect(out.headers.get("set-cookie")).toBe(`${cookieName()}=; Path=/api; HttpOnly; SameSite=Strict; Max-Age=0`);
  const after = await s.api("/api/control", { headers: withCookie(r.cookie ?? "") });
  expect(after.status).toBe(401);
  expect(((await after.json()) as { code: string }).code).toBe("invalid_session");
});

test("a cookie from another listener: under this listener's name it is unknown (401 invalid_session); under its own name it is not read (401 unauthorized)", async () => {
  const other = await startSluice(yaml(usersText));
  try {
    const ada = userOf("admin");
    const theirs = await signIn(ada.name, ada.password, other);
    const value = (theirs.cookie ?? "").split("=")[1] ?? "";
    const renamed = await s.api("/api/control", { headers: withCookie(`${cookieName()}=${value}`) });
    expect(renamed.status).toBe(401);
    expect(((await renamed.json()) as { code: string }).code).toBe("invalid_session");
    const asIs = await s.api("/api/control", { headers: withCookie(theirs.cookie ?? "") });
    expect(asIs.status).toBe(401);
    expect(((await asIs.json()) as { code: string }).code).toBe("unauthorized");
  } finally {
    await other.stop();
  }
});

test("the Origin check guards cookie-authenticated writes: a foreign origin is 403 forbidden_origin, the listener's own page passes", async () => {
  const ada = userOf("admin");
  const r = await signIn(ada.name, ada.password);
  const foreign = await s.api("/api/plugins/ads/mode", { method: "POST", headers: withCookie(r.cookie ?? "", { origin: "http://evil.example", "content-type": "application/json" }), body: JSON.stringify({ mode: "always_false" }) });
  expect(foreign.status).toBe(403);
  expect(((await foreign.json()) as { code: string }).code).toBe("forbidden_origin");
  const own = await s.api("/api/plugins/ads/mode", { method: "POST", headers: withCookie(r.cookie ?? "", { origin: s.apiUrl, "content-type": "application/json" }), body: JSON.stringify({ mode: "normal" }) });
  expect(own.status).toBe(200);
});

test("a reload that removes a user ends its sessions; one that changes its role applies at once", async () => {
  const otto = userOf("operator");
  const vera = userOf("viewer");
  const ottoSession = await signIn(otto.name, otto.password);
  const veraSession = await signIn(vera.name, vera.password);
  const changed = ROLE_USERS.filter((u) => u.name !== otto.name).map((u) => (u.name === vera.name ? { ...u, role: "operator" as const } : u));
  writeFileSync(join(s.dir, "sluice.yaml"), yaml(await usersYaml(changed)));
  const ada = userOf("admin");
  expect((await s.api("/api/reload", { method: "POST", headers: { authorization: basic(ada.name, ada.password) } })).status).toBe(202);
  for (let i = 0; i < 100 && ((await (await s.api("/api/reload/status", { headers: { authorization: basic(ada.name, ada.password) } })).json()) as { status: string }).status !== "ok"; i++) await new Promise((r) => setTimeout(r, 50));
  const gone = await s.api("/api/control", { headers: withCookie(ottoSession.cookie ?? "") });
  expect(gone.status).toBe(401);
  const me = (await (await s.api("/api/session", { headers: withCookie(veraSession.cookie ?? "") })).json()) as { principal: { role: string } };
  expect(me.principal.role).toBe("operator");
  writeFileSync(join(s.dir, "sluice.yaml"), yaml(usersText));
  await s.api("/api/reload", { method: "POST", headers: { authorization: basic(ada.name, ada.password) } });
});

test("an unknown user takes as long to refuse as a wrong password (a dummy hash is checked)", async () => {
  // The default cost (2^15) so the check dominates; with no dummy hash an unknown user would be refused in well under a millisecond.
  const dir = tempDir();
  const t = await startSluice(`
api:
  http:
    listen: 127.0.0.1:0
    auth:
      users:
        - { name: real, role: admin, password_hash: "${await (await import("../../src/api/auth/passwords.js")).hashPassword("right")}" }
      throttle: { address_failures: 1000, user_failures: 1000 }
plugins: []
`, {}, { dir });
  try {
    const time = async (user: string): Promise<number> => {
      const t0 = performance.now();
      const res = await t.api("/api/healthz", { headers: { authorization: basic(user, "wrong") } });
      expect(res.status).toBe(401);
      return performance.now() - t0;
    };
    const median = (xs: number[]): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 4; i++) {
      known.push(await time("real"));
      unknown.push(await time(`ghost${i}`));
    }
    const ratio = median(unknown) / median(known);
    expect(median(known)).toBeGreaterThan(5);
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(2);
  } finally {
    await t.stop();
  }
});

test("without users: GET /api/session says so (anonymous admin) and POST /api/session is 409 auth_not_configured", async () => {
  const open = await startSluice(`
api:
  http:
    listen: 127.0.0.1:0
plugins: []
`);
  try {
    expect(await (await open.api("/api/session")).json()).toMatchObject({ ok: true, auth_required: false, principal: { kind: "anonymous", role: "admin", via: "none" }, session: null });
    const post = await open.api("/api/session", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "a", password: "b" }) });
    expect(post.status).toBe(409);
    expect(((await post.json()) as { code: string }).code).toBe("auth_not_configured");
  } finally {
    await open.stop();
  }
});

test("the single user of earlier versions signs in as an admin; over TLS the cookie is Secure", async () => {
  requireOpenssl();
  const dir = tempDir();
  const pki = makePki(dir);
  const tls = await startSluice(`
api:
  http:
    listen: 127.0.0.1:0
    ssl: { cert: ${join(pki.dir, "server.crt")}, key: ${join(pki.dir, "server.key")} }
    auth: { type: basic, username: admin, password: "old secret" }
plugins: []
`, {}, { dir });
  try {
    const tlsPort = Number(new URL(tls.apiUrl).port);
    const res = await rawRequest({ port: tlsPort, method: "POST", path: "/api/session", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "admin", password: "old secret" }), tls: { ca: pki.ca } });
    expect(res.status).toBe(200);
    expect(String(res.headers["set-cookie"])).toMatch(/; Secure$/);
    expect(JSON.parse(res.text)).toMatchObject({ session: { user: "admin", role: "admin" } });
    // And Basic with the same pair keeps working as before.
    expect((await rawRequest({ port: tlsPort, path: "/api/config", headers: { authorization: basic("admin", "old secret") }, tls: { ca: pki.ca } })).status).toBe(200);
  } finally {
    await tls.stop();
  }
});

test("a session survives a restart (its hash is in the state file)", async () => {
  const vera = userOf("viewer");
  const r = await signIn(vera.name, vera.password);
  const dir = s.dir;
  await s.app.stop();
  s = await startSluice(yaml(usersText), {}, { dir, clockShift: clock });
  port = Number(new URL(s.apiUrl).port);
  // The port is new (port 0), so the cookie's name is too; its value still names the session.
  const value = (r.cookie ?? "").split("=")[1] ?? "";
  expect((await s.api("/api/control", { headers: withCookie(`${cookieName()}=${value}`) })).status).toBe(200);
});

test("the audit trail names the session's user; the dashboard's \"who am I?\" without credentials is not written, other refusals are", async () => {
  const otto = userOf("operator");
  const r = await signIn(otto.name, otto.password);
  await s.api("/api/plugins/ads/mode", { method: "POST", headers: withCookie(r.cookie ?? "", { "content-type": "application/json" }), body: JSON.stringify({ mode: "always_true", duration: "1m" }) });
  expect((await s.api("/api/session")).status).toBe(401);
  expect((await s.api("/api/plugins")).status).toBe(401);
  const ada = userOf("admin");
  const page = (await (await s.api("/api/audit?limit=3", { headers: { authorization: basic(ada.name, ada.password) } })).json()) as { entries: { actor: string; via: string; status: number; path: string; summary: string }[] };
  expect(page.entries.map((e) => `${e.actor} ${e.via} ${e.status} ${e.path} ${e.summary}`)).toEqual([
    "anonymous none 401 /api/plugins GET /api/plugins",
    "otto session 200 /api/plugins/ads/mode qname ads → always_true for 1m",
    "otto session 200 /api/session sign in as otto",
  ]);
  await s.api("/api/plugins/ads/mode", { method: "POST", headers: withCookie(r.cookie ?? "", { "content-type": "application/json" }), body: JSON.stringify({ mode: "normal" }) });
});

test("fastHash makes hashes of the format sluice passwd writes", async () => {
  expect(await fastHash("x")).toMatch(/^\$scrypt\$ln=10,r=8,p=1\$/);
});
