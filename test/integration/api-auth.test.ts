// Basic Auth on /api/*: header parsing edge cases, the 401 answer, what stays open (preflight,
// WebUI), encoded paths that reach API routes, reloads, and the password never reaching a log.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { jsonOf, rawRequest, type RawResponse } from "../helpers/http.js";
import { startInWorkdir, type WorkdirSluice } from "../helpers/workdir.js";

const USER = "admin";
// Contains ':' and non-ASCII characters; its Base64 has a '/' and '=' padding (both checked below).
const PASSWORD = "ké:y✓??";
const PAIR = `${USER}:${PASSWORD}`;
const STANDARD = Buffer.from(PAIR, "utf8").toString("base64");

const config = (password: string): string => `
api:
  http:
    listen: "127.0.0.1:0"
    # These tests send many wrong headers on purpose: the sign-in throttle (test/integration/auth-throttle.test.ts) is raised out of their way.
    auth: { type: basic, username: ${USER}, password: "${password}", throttle: { address_failures: 10000, user_failures: 10000 } }
    webui: { root: www }
`;

let s: WorkdirSluice;
let port: number;
beforeAll(async () => {
  s = await startInWorkdir(config(PASSWORD), { "www/index.html": "<title>ui</title>" });
  port = s.port;
});
afterAll(() => s.stop());

const get = (path: string, headers: Record<string, string> = {}, method = "GET"): Promise<RawResponse> => rawRequest({ port, path, headers, method });
const withAuth = (authorization: string, path = "/api/healthz"): Promise<RawResponse> => get(path, { authorization });

function expect401(res: RawResponse): void {
  expect(res.status).toBe(401);
  expect(res.headers["www-authenticate"]).toBe('Basic realm="sluice"');
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  expect(jsonOf(res)).toEqual({ ok: false, code: "unauthorized", message: expect.any(String) as string });
}

test("the test credentials exercise '/', padding, ':' and UTF-8", () => {
  expect(STANDARD).toContain("/");
  expect(STANDARD.endsWith("=")).toBe(true);
  expect(Buffer.byteLength(PAIR)).toBeGreaterThan(PAIR.length);
});

test("the right credentials open /api/healthz; a missing header gets 401 with the realm and the JSON error shape", async () => {
  const ok = await withAuth(`Basic ${STANDARD}`);
  expect(ok.status).toBe(200);
  expect(ok.text).toBe("ok");
  expect401(await get("/api/healthz"));
});

test("X-Requested-With: XMLHttpRequest gets the same 401 without the Basic challenge (no browser password dialog); other values keep it", async () => {
  for (const value of ["XMLHttpRequest", "xmlhttprequest"]) {
    const res = await get("/api/plugins", { "x-requested-with": value });
    expect(res.status).toBe(401);
    expect(res.headers["www-authenticate"]).toBeUndefined();
    expect(jsonOf(res)).toEqual({ ok: false, code: "unauthorized", message: "missing or wrong credentials" });
    expect((await get("/api/healthz", { "x-requested-with": value, authorization: "Basic d3Jvbmc6cGFpcg==" })).headers["www-authenticate"]).toBeUndefined();
  }
  expect401(await get("/api/plugins", { "x-requested-with": "fetch" }));
  // The header changes only the challenge: the right credentials still open the API.
  expect((await get("/api/healthz", { "x-requested-with": "XMLHttpRequest", authorization: `Basic ${STANDARD}` })).status).toBe(200);
});

test("wrong password, wrong user, and near misses of the pair are refused", async () => {
  const b64 = (text: string, enc: BufferEncoding = "utf8"): string => Buffer.from(text, enc).toString("base64");
  for (const pair of [`${USER}:wrong`, `root:${PASSWORD}`, `${USER}:${PASSWORD} `, ` ${PAIR}`, `${USER}${PASSWORD}`, USER, `${USER}:`, `:${PASSWORD}`, `${USER}:ké:y✓?`]) {
    expect401(await withAuth(`Basic ${b64(pair)}`));
  }
  // The same characters in Latin-1 instead of UTF-8 are different bytes.
  expect401(await withAuth(`Basic ${b64(`${USER}:ké:y`, "latin1")}`));
});

test("the scheme name is case-insensitive and extra spaces around the credentials are accepted (RFC 7235)", async () => {
  for (const header of [`basic ${STANDARD}`, `BASIC ${STANDARD}`, `bAsIc ${STANDARD}`, `Basic    ${STANDARD}`, `Basic ${STANDARD}   `]) {
    expect((await withAuth(header)).status, header).toBe(200);
  }
});

test("URL-safe Base64, unpadded Base64, garbage and other schemes are refused", async () => {
  const urlSafe = STANDARD.replace(/\+/g, "-").replace(/\//g, "_");
  const unpadded = STANDARD.replace(/=+$/, "");
  for (const header of [
    `Basic ${urlSafe}`,
    `Basic ${unpadded}`,
    `Basic ${urlSafe.replace(/=+$/, "")}`,
    "Basic !!!!",
    "Basic ****====",
    "Basic ",
    "Basic",
    `Basic${STANDARD}`,
    `Basic ${STANDARD} ${STANDARD}`,
    `Basic =${STANDARD}`,
    `Digest ${STANDARD}`,
    STANDARD,
    `Basic ${Buffer.from(STANDARD).toString("base64")}`,
  ]) {
    expect401(await withAuth(header));
  }
});

test("a Bearer header is checked as an API token: one this server never issued is 401 invalid_token", async () => {
  const res = await withAuth(`Bearer ${STANDARD}`);
  expect(res.status).toBe(401);
  expect(jsonOf(res)).toEqual({ ok: false, code: "invalid_token", message: "the token is not one this server issued" });
});

test("CORS preflight needs no credentials (204), also for unknown /api paths", async () => {
  for (const path of ["/api/healthz", "/api/no/such/route"]) {
    const res = await get(path, { origin: "http://127.0.0.1:5173", "access-control-request-method": "GET", "access-control-request-headers": "authorization" }, "OPTIONS");
    expect(res.status, path).toBe(204);
    expect(res.headers["access-control-allow-origin"]).toBe("http://127.0.0.1:5173");
    expect(res.headers["access-control-allow-headers"]).toMatch(/Authorization/);
    expect(res.text).toBe("");
  }
});

test("the WebUI is served without credentials while /api/* needs them", async () => {
  const ui = await get("/");
  expect(ui.status).toBe(200);
  expect(ui.text).toBe("<title>ui</title>");
  expect((await get("/some/client/route")).text).toBe("<title>ui</title>");
  expect401(await get("/api/health"));
  expect401(await get("/api/no/such/route"));
  expect((await withAuth(`Basic ${STANDARD}`, "/api/no/such/route")).status).toBe(404);
});

test("percent-encoded or malformed /api paths cannot slip past auth", async () => {
  // The router decodes `%61` to `a`, so these reach the /api/healthz route: they must be gated too.
  for (const path of ["/%61pi/healthz", "/ap%69/healthz", "/%61%70%69/healthz", "/api/health%7A", "/api/%zz", "/%61pi/%zz"]) {
    expect401(await get(path));
  }
  expect((await withAuth(`Basic ${STANDARD}`, "/%61pi/healthz")).text).toBe("ok");
  const bad = await withAuth(`Basic ${STANDARD}`, "/api/%zz");
  expect(bad.status).toBe(400);
  expect(jsonOf(bad)).toMatchObject({ ok: false, code: "invalid_path" });
});

test("the password (and its Base64 form) never appears in any log line after failed and successful logins", async () => {
  await get("/api/healthz");
  await withAuth(`Basic ${Buffer.from(`${USER}:wrong`).toString("base64")}`);
  await withAuth(`Basic ${STANDARD}`);
  await withAuth(`Basic ${STANDARD}`, "/api/no/such/route");
  const viaApi = await withAuth(`Basic ${STANDARD}`, "/api/logs?limit=1000&level=trace");
  expect(viaApi.status).toBe(200);
  const served = jsonOf(viaApi) as { entries: unknown[] };
  expect(served.entries.length).toBeGreaterThan(0);
  const everything = [JSON.stringify(s.logs), JSON.stringify(s.app.logRing.tail(s.app.logRing.capacity)), viaApi.text];
  expect(s.logs.length).toBeGreaterThan(0);
  for (const text of everything) {
    expect(text).not.toContain(PASSWORD);
    expect(text).not.toContain(JSON.stringify(PASSWORD).slice(1, -1));
    expect(text).not.toContain(STANDARD);
  }
});

test("a reload with a new password applies at once: the old one stops working", async () => {
  const next = "n3w-pass";
  writeFileSync(join(s.dir, "conf", "sluice.yaml"), config(next));
  const accepted = await rawRequest({ port, method: "POST", path: "/api/reload", headers: { authorization: `Basic ${STANDARD}` } });
  expect(accepted.status).toBe(202);
  const fresh = `Basic ${Buffer.from(`${USER}:${next}`).toString("base64")}`;
  const deadline = Date.now() + 10_000;
  let status = "";
  while (Date.now() < deadline) {
    const res = await withAuth(fresh, "/api/reload/status");
    status = res.status === 200 ? String(jsonOf(res).status) : `http ${res.status}`;
    if (status === "ok" || status === "failed") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(status).toBe("ok");
  expect401(await withAuth(`Basic ${STANDARD}`));
  expect((await withAuth(fresh)).status).toBe(200);
  expect(JSON.stringify(s.logs)).not.toContain(next);
});
