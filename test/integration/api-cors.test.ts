// CORS on /api/*: the policy derived from each listen-address form, an explicit allowed_origins
// list, preflight before auth, and CORS headers on error answers; none on WebUI files.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { rawRequest, type RawResponse } from "../helpers/http.js";
import { startInWorkdir, type WorkdirSluice } from "../helpers/workdir.js";

interface Seen {
  origin: string | undefined;
  credentials: string | undefined;
  vary: string | undefined;
}

async function corsOf(host: string, port: number, origin: string | undefined, method = "GET", path = "/api/healthz"): Promise<Seen & { status: number }> {
  const res = await rawRequest({ host, port, method, path, headers: origin === undefined ? {} : { origin } });
  return { status: res.status, ...seen(res) };
}

function seen(res: RawResponse): Seen {
  const h = res.headers;
  return { origin: h["access-control-allow-origin"], credentials: h["access-control-allow-credentials"], vary: h.vary };
}

/** Starts Sluice with this api section, runs `body` against (host, port), stops. */
async function withApi(api: string, body: (port: number) => Promise<void>): Promise<void> {
  const s = await startInWorkdir(`api:\n  http:\n${api}\n`);
  try {
    await body(s.port);
  } finally {
    await s.stop();
  }
}

const echoed = (origin: string): Seen => ({ origin, credentials: "true", vary: "Origin" });
const none: Seen = { origin: undefined, credentials: undefined, vary: "Origin" };
const wildcard: Seen = { origin: "*", credentials: undefined, vary: undefined };

describe("policy derived from the listen address", () => {
  test("0.0.0.0 → Access-Control-Allow-Origin: * without credentials, whatever the Origin", async () => {
    await withApi(`    listen: "0.0.0.0:0"`, async (port) => {
      for (const origin of ["http://evil.example", "http://127.0.0.1:5173", undefined]) {
        expect(await corsOf("127.0.0.1", port, origin), String(origin)).toMatchObject({ status: 200, ...wildcard });
      }
    });
  });

  test("[::] → * as well (reached over ::1)", async () => {
    await withApi(`    listen: "[::]:0"`, async (port) => {
      expect(await corsOf("::1", port, "https://anything.example:8443")).toMatchObject({ status: 200, ...wildcard });
    });
  });

  test(":0 (dual stack) → *", async () => {
    await withApi(`    listen: ":0"`, async (port) => {
      expect(await corsOf("127.0.0.1", port, "https://anything.example")).toMatchObject({ status: 200, ...wildcard });
    });
  });

  test("a specific IP (127.0.0.2) → same-host origins echoed with credentials (any scheme/port); other hosts, localhost included, get none", async () => {
    await withApi(`    listen: "127.0.0.2:0"`, async (port) => {
      for (const origin of ["http://127.0.0.2:5173", "https://127.0.0.2", "http://127.0.0.2"]) {
        expect(await corsOf("127.0.0.2", port, origin), origin).toMatchObject({ status: 200, ...echoed(origin) });
      }
      for (const origin of ["http://127.0.0.1:5173", "http://localhost:5173", "http://127.0.0.2.evil.example", "null", "not a url"]) {
        expect(await corsOf("127.0.0.2", port, origin), origin).toMatchObject({ status: 200, ...none });
      }
      expect(await corsOf("127.0.0.2", port, undefined)).toMatchObject({ status: 200, ...none });
    });
  });

  test("127.0.0.1 → its own host and localhost (any port/scheme); lookalike hosts get none", async () => {
    await withApi(`    listen: "127.0.0.1:0"`, async (port) => {
      for (const origin of ["http://127.0.0.1:8080", "https://127.0.0.1", "http://localhost:3000", "https://localhost"]) {
        expect(await corsOf("127.0.0.1", port, origin), origin).toMatchObject(echoed(origin));
      }
      for (const origin of ["http://evil.example", "http://localhost.evil.example", "http://127.0.0.1.evil.example", "http://[::1]:3000"]) {
        expect(await corsOf("127.0.0.1", port, origin), origin).toMatchObject(none);
      }
    });
  });

  test("[::1] → [::1] origins and localhost; 127.0.0.1 gets none", async () => {
    await withApi(`    listen: "[::1]:0"`, async (port) => {
      for (const origin of ["http://[::1]:3000", "https://[::1]", "http://localhost:8080"]) {
        expect(await corsOf("::1", port, origin), origin).toMatchObject(echoed(origin));
      }
      expect(await corsOf("::1", port, "http://127.0.0.1:3000")).toMatchObject(none);
    });
  });
});

test("a long-form IPv6 listen address matches the browser's short-form origin", async () => {
  await withApi(`    listen: "[0:0:0:0:0:0:0:1]:0"`, async (port) => {
    expect(await corsOf("::1", port, "http://[::1]:3000")).toMatchObject(echoed("http://[::1]:3000"));
    expect(await corsOf("::1", port, "http://localhost:3000")).toMatchObject(echoed("http://localhost:3000"));
  });
});

describe("explicit cors.allowed_origins", () => {
  test("exact match only, and it replaces the address-derived policy", async () => {
    await withApi(`    listen: "127.0.0.1:0"\n    cors: { allowed_origins: ["https://ui.example:8443", "http://tool.example"] }`, async (port) => {
      for (const origin of ["https://ui.example:8443", "http://tool.example"]) {
        expect(await corsOf("127.0.0.1", port, origin), origin).toMatchObject(echoed(origin));
      }
      for (const origin of ["https://ui.example", "http://ui.example:8443", "https://ui.example:8443/", "http://tool.example:80", "http://127.0.0.1:5173", "http://localhost:3000"]) {
        expect(await corsOf("127.0.0.1", port, origin), origin).toMatchObject(none);
      }
    });
  });

  test("a `*` entry is the wildcard (no credentials); listed origins are still echoed with credentials", async () => {
    await withApi(`    listen: "127.0.0.1:0"\n    cors: { allowed_origins: ["*"] }`, async (port) => {
      expect(await corsOf("127.0.0.1", port, "http://evil.example")).toMatchObject(wildcard);
    });
    await withApi(`    listen: "127.0.0.1:0"\n    cors: { allowed_origins: ["*", "https://ui.example"] }`, async (port) => {
      expect(await corsOf("127.0.0.1", port, "https://ui.example")).toMatchObject(echoed("https://ui.example"));
      expect(await corsOf("127.0.0.1", port, "http://other.example")).toMatchObject({ origin: "*", credentials: undefined, vary: "Origin" });
    });
  });
});

describe("with Basic Auth and a WebUI", () => {
  let s: WorkdirSluice;
  const origin = "http://127.0.0.1:5173";
  const auth = `Basic ${Buffer.from("ops:secret").toString("base64")}`;
  beforeAll(async () => {
    s = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    auth: { username: ops, password: secret }\n    webui: { root: www }\n`, {
      "www/index.html": "<p>ui</p>",
      "www/app.js": "console.log(1)",
    });
  });
  afterAll(() => s.stop());

  test("preflight is answered 204 before auth, for known and unknown /api paths, with methods and headers", async () => {
    for (const path of ["/api/healthz", "/api/reload", "/api/does/not/exist", "/api"]) {
      const res = await rawRequest({ port: s.port, method: "OPTIONS", path, headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" } });
      expect(res.status, path).toBe(204);
      expect(seen(res), path).toEqual(echoed(origin));
      expect(res.headers["access-control-allow-methods"]).toBe("GET, POST, PUT, PATCH, DELETE, OPTIONS");
      expect(res.headers["access-control-allow-headers"]).toMatch(/Authorization/);
      expect(res.headers["access-control-allow-headers"]).toMatch(/Content-Type/);
    }
  });

  test("a disallowed origin's preflight is still 204 but carries no Allow-Origin (the browser blocks it)", async () => {
    const res = await rawRequest({ port: s.port, method: "OPTIONS", path: "/api/healthz", headers: { origin: "http://evil.example", "access-control-request-method": "GET" } });
    expect(res.status).toBe(204);
    expect(seen(res)).toEqual(none);
  });

  test("error answers carry the CORS headers too: 401, 404 and 400", async () => {
    const unauthorized = await rawRequest({ port: s.port, path: "/api/healthz", headers: { origin } });
    expect(unauthorized.status).toBe(401);
    expect(seen(unauthorized)).toEqual(echoed(origin));

    const missing = await rawRequest({ port: s.port, path: "/api/does/not/exist", headers: { origin, authorization: auth } });
    expect(missing.status).toBe(404);
    expect(seen(missing)).toEqual(echoed(origin));

    const badJson = await rawRequest({ port: s.port, method: "POST", path: "/api/reload", headers: { origin, authorization: auth, "content-type": "application/json" }, body: "{not json" });
    expect(badJson.status).toBe(400);
    expect(seen(badJson)).toEqual(echoed(origin));
  });

  test("WebUI files carry no CORS headers", async () => {
    for (const path of ["/", "/app.js", "/client/route"]) {
      const res = await rawRequest({ port: s.port, path, headers: { origin } });
      expect(res.status, path).toBe(200);
      expect(res.headers["access-control-allow-origin"], path).toBeUndefined();
    }
  });
});
