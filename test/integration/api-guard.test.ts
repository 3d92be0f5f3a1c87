// The Host check (DNS rebinding) and the Origin check (CSRF) over real listeners: the filed attacks
// (a cross-site simple POST to /api/shutdown, `Host: evil.example` on GET /api/config), what still
// passes (curl without Origin, the policy's own origins, the WebUI's same-host requests, preflight),
// allowed_hosts, the order against auth, and the API connection cap.
import { writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { runCli, startCli } from "../helpers/cli.js";
import { jsonOf, rawRequest, type RawResponse } from "../helpers/http.js";
import { apiYaml, tempDir } from "../helpers/sluice.js";
import { startInWorkdir, type WorkdirSluice } from "../helpers/workdir.js";

const EVIL = "https://evil.example";

async function withApi(http: string, body: (s: WorkdirSluice) => Promise<void>): Promise<void> {
  const s = await startInWorkdir(`api:\n  http:\n${http}\n`, { "www/index.html": "<title>ui</title>", "www/app.js": "export {}" });
  try {
    await body(s);
  } finally {
    await s.stop();
  }
}

function expectRefused(res: RawResponse, code: "forbidden_host" | "forbidden_origin", what: string): void {
  expect(res.status, what).toBe(403);
  expect(jsonOf(res), what).toEqual({ ok: false, code, message: expect.any(String) as string });
}

describe("the filed attack on /api/shutdown, against the real program", () => {
  test("a cross-site simple POST (foreign Origin, text/plain) gets 403 forbidden_origin and the process keeps serving", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), apiYaml("accept"));
    const run = startCli(["-c", "sluice.yaml", "-d", dir]);
    try {
      const port = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
      const res = await rawRequest({ port, method: "POST", path: "/api/shutdown", headers: { origin: EVIL, "content-type": "text/plain" }, body: "x" });
      expectRefused(res, "forbidden_origin", "shutdown");
      expect(jsonOf(res).message).toMatch(/evil\.example.*allowed_origins/);
      // Same for the other state-changing routes.
      for (const path of ["/api/restart", "/api/reload"]) {
        expectRefused(await rawRequest({ port, method: "POST", path, headers: { origin: EVIL } }), "forbidden_origin", path);
      }
      await new Promise((r) => setTimeout(r, 300));
      expect(run.child.exitCode).toBeNull();
      expect((await rawRequest({ port, path: "/api/healthz" })).status).toBe(200);
      expect(run.logs.some((l) => l.msg === "shutting down" || l.msg === "restarting")).toBe(false);
    } finally {
      run.child.kill("SIGKILL");
      await run.exited;
    }
  });

  test("the same POST without Origin (curl, scripts) still gets 202 and the process exits", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), apiYaml("accept"));
    const run = startCli(["-c", "sluice.yaml", "-d", dir]);
    try {
      const port = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
      const res = await rawRequest({ port, method: "POST", path: "/api/shutdown", headers: { "content-type": "text/plain" }, body: "x" });
      expect(res.status).toBe(202);
      expect((await run.exited).code).toBe(0);
    } finally {
      run.child.kill("SIGKILL");
    }
  });
});

describe("Host check on a loopback listener (127.0.0.1)", () => {
  let s: WorkdirSluice;
  beforeAll(async () => {
    s = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: { root: www }\n`, { "www/index.html": "<title>ui</title>", "www/app.js": "export {}" });
  });
  afterAll(() => s.stop());
  const withHost = (host: string, path: string): Promise<RawResponse> => rawRequest({ port: s.port, path, headers: { host } });

  test("Host: evil.example (DNS rebinding) gets 403 forbidden_host for GET /api/config and for the WebUI", async () => {
    for (const path of ["/api/config", "/api/healthz", "/", "/app.js", "/client/route", "/api/%zz"]) {
      expectRefused(await withHost("evil.example", path), "forbidden_host", path);
    }
    expect(jsonOf(await withHost("evil.example:8080", "/api/config")).message).toMatch(/evil\.example.*allowed_hosts/);
  });

  test("localhost and loopback addresses pass, any port and case; lookalikes and malformed values do not", async () => {
    for (const host of [`localhost:${s.port}`, "localhost", "LOCALHOST:1", "localhost.", `127.0.0.1:${s.port}`, "127.0.0.1", "127.8.9.10:80", `[::1]:${s.port}`, "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"]) {
      const config = await withHost(host, "/api/config");
      expect(config.status, host).toBe(200);
      expect((await withHost(host, "/")).text, host).toBe("<title>ui</title>");
    }
    for (const host of ["localhost.evil.example", "127.0.0.1.evil.example", "evil.example@127.0.0.1", "192.168.1.10", "[2001:db8::1]", "127.0.0.1:80:80", "local host", "[::1", "0x7f.1"]) {
      expectRefused(await withHost(host, "/api/config"), "forbidden_host", JSON.stringify(host));
    }
  });

  test("every /api answer carries X-Content-Type-Options: nosniff: JSON, text, errors and refusals alike", async () => {
    const local = `127.0.0.1:${s.port}`;
    const answers = {
      health: await withHost(local, "/api/health"),
      text: await withHost(local, "/api/healthz"),
      metrics: await withHost(local, "/api/metrics"),
      missing: await withHost(local, "/api/no/such/route"),
      badPath: await withHost(local, "/api/%zz"),
      badQuery: await withHost(local, "/api/logs?limit=abc"),
      refused: await withHost("evil.example", "/api/config"),
    };
    expect(answers.missing.status).toBe(404);
    expect(answers.badPath.status).toBe(400);
    expect(answers.badQuery.status).toBe(400);
    for (const [what, res] of Object.entries(answers)) expect(res.headers["x-content-type-options"], what).toBe("nosniff");
  });

  const exchange = (request: string): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const sock = net.connect(s.port, "127.0.0.1", () => sock.write(request));
      let got = "";
      sock.on("data", (d: Buffer) => (got += d.toString()));
      sock.on("end", () => resolve(got));
      sock.on("error", reject);
    });

  test("an HTTP/1.0 request without a Host header passes; an empty Host does not", async () => {
    const text = await exchange("GET /api/healthz HTTP/1.0\r\n\r\n");
    expect(text).toMatch(/^HTTP\/1\.[01] 200/);
    expect(text.endsWith("ok")).toBe(true);
    expect(await exchange("GET /api/healthz HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 403 .*forbidden_host/s);
  });
});

describe("Host check on a wildcard listener (0.0.0.0), reached over 127.0.0.1", () => {
  test("IP-literal Hosts pass; a name gets 403 unless it is in allowed_hosts", async () => {
    await withApi(`    listen: "0.0.0.0:0"\n    webui: { root: www }`, async (s) => {
      for (const host of [`127.0.0.1:${s.port}`, "192.0.2.7", "[2001:db8::1]:9091"]) {
        expect((await rawRequest({ port: s.port, path: "/api/config", headers: { host } })).status, host).toBe(200);
      }
      for (const host of ["dash.home.arpa", "dash.home.arpa:9091", "localhost"]) {
        expectRefused(await rawRequest({ port: s.port, path: "/api/config", headers: { host } }), "forbidden_host", host);
      }
      expectRefused(await rawRequest({ port: s.port, path: "/", headers: { host: "dash.home.arpa" } }), "forbidden_host", "webui");
    });
    await withApi(`    listen: "0.0.0.0:0"\n    allowed_hosts: [Dash.Home.Arpa, "nas.lan.:8080"]`, async (s) => {
      for (const host of ["dash.home.arpa", "DASH.home.arpa:9091", "dash.home.arpa.", "nas.lan", "nas.lan:1"]) {
        expect((await rawRequest({ port: s.port, path: "/api/config", headers: { host } })).status, host).toBe(200);
      }
      for (const host of ["evil.example", "x.dash.home.arpa", "dash.home.arpa.evil.example"]) {
        expectRefused(await rawRequest({ port: s.port, path: "/api/config", headers: { host } }), "forbidden_host", host);
      }
    });
  });

  test("allowed_hosts also extends a loopback listener, and `*` switches the check off", async () => {
    await withApi(`    listen: "127.0.0.1:0"\n    allowed_hosts: [dns.example]`, async (s) => {
      expect((await rawRequest({ port: s.port, path: "/api/config", headers: { host: "dns.example" } })).status).toBe(200);
      expectRefused(await rawRequest({ port: s.port, path: "/api/config", headers: { host: "evil.example" } }), "forbidden_host", "evil");
    });
    await withApi(`    listen: "127.0.0.1:0"\n    allowed_hosts: ["*"]`, async (s) => {
      expect((await rawRequest({ port: s.port, path: "/api/config", headers: { host: "evil.example" } })).status).toBe(200);
    });
  });
});

describe("Origin check on state-changing requests", () => {
  // POST /api/config/validate changes nothing, so it can be asked again and again.
  const post = (port: number, headers: Record<string, string>, path = "/api/config/validate"): Promise<RawResponse> =>
    rawRequest({ port, method: "POST", path, headers: { "content-type": "text/plain", ...headers }, body: "plugins: []\n" });

  test("loopback listener: the policy's own origins pass; foreign, lookalike and null origins get 403; GET reads are untouched", async () => {
    await withApi(`    listen: "127.0.0.1:0"`, async (s) => {
      for (const origin of ["http://127.0.0.1:5173", "http://localhost:3000", `http://127.0.0.1:${s.port}`]) {
        const res = await post(s.port, { origin });
        expect(res.status, origin).toBe(200);
        expect(res.headers["access-control-allow-origin"], origin).toBe(origin);
      }
      for (const origin of [EVIL, "http://localhost.evil.example", "null", "not a url"]) {
        expectRefused(await post(s.port, { origin }), "forbidden_origin", origin);
      }
      // PUT and DELETE are state-changing too; an unknown route is refused before the 404.
      expectRefused(await rawRequest({ port: s.port, method: "PUT", path: "/api/config", headers: { origin: EVIL, "content-type": "application/json" }, body: "{}" }), "forbidden_origin", "PUT");
      expectRefused(await rawRequest({ port: s.port, method: "DELETE", path: "/api/nothing", headers: { origin: EVIL } }), "forbidden_origin", "DELETE");
      const read = await rawRequest({ port: s.port, path: "/api/healthz", headers: { origin: EVIL } });
      expect(read.status).toBe(200);
      expect(read.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });

  test("wildcard listener: reads from any origin keep `*`; writes pass only from the same host or an explicitly listed origin", async () => {
    await withApi(`    listen: "0.0.0.0:0"`, async (s) => {
      const read = await rawRequest({ port: s.port, path: "/api/healthz", headers: { origin: EVIL } });
      expect([read.status, read.headers["access-control-allow-origin"]]).toEqual([200, "*"]);
      expectRefused(await post(s.port, { origin: EVIL }), "forbidden_origin", "evil");
      // The WebUI on this listener: Origin host = Host.
      expect((await post(s.port, { origin: `http://127.0.0.1:${s.port}`, host: `127.0.0.1:${s.port}` })).status).toBe(200);
      expectRefused(await post(s.port, { origin: "http://192.0.2.9", host: `127.0.0.1:${s.port}` }), "forbidden_origin", "other ip");
    });
    await withApi(`    listen: "0.0.0.0:0"\n    cors: { allowed_origins: ["*", "https://ui.example"] }`, async (s) => {
      expect((await post(s.port, { origin: "https://ui.example" })).status).toBe(200);
      expectRefused(await post(s.port, { origin: EVIL }), "forbidden_origin", "`*` does not open writes");
    });
  });

  test("preflight is unaffected: 204 for any origin, Allow-Origin only for allowed ones", async () => {
    await withApi(`    listen: "127.0.0.1:0"`, async (s) => {
      const headers = { "access-control-request-method": "POST" };
      const evil = await rawRequest({ port: s.port, method: "OPTIONS", path: "/api/shutdown", headers: { ...headers, origin: EVIL } });
      expect([evil.status, evil.headers["access-control-allow-origin"]]).toEqual([204, undefined]);
      const own = await rawRequest({ port: s.port, method: "OPTIONS", path: "/api/shutdown", headers: { ...headers, origin: "http://localhost:5173" } });
      expect([own.status, own.headers["access-control-allow-origin"]]).toEqual([204, "http://localhost:5173"]);
    });
  });

  test("a cross-site or same-site browser request without Origin (img, link, no-cors) is refused on /api, not on the WebUI", async () => {
    await withApi(`    listen: "127.0.0.1:0"\n    webui: { root: www }`, async (s) => {
      for (const site of ["cross-site", "same-site"]) {
        expectRefused(await rawRequest({ port: s.port, path: "/api/config", headers: { "sec-fetch-site": site } }), "forbidden_origin", site);
        expect((await rawRequest({ port: s.port, path: "/", headers: { "sec-fetch-site": site } })).status, site).toBe(200);
      }
      for (const site of ["same-origin", "none"]) {
        expect((await rawRequest({ port: s.port, path: "/api/config", headers: { "sec-fetch-site": site } })).status, site).toBe(200);
      }
    });
  });
});

test("Host and Origin are checked before Basic Auth (403, not 401)", async () => {
  await withApi(`    listen: "127.0.0.1:0"\n    auth: { username: ops, password: secret }`, async (s) => {
    expectRefused(await rawRequest({ port: s.port, path: "/api/config", headers: { host: "evil.example" } }), "forbidden_host", "host");
    expectRefused(await rawRequest({ port: s.port, method: "POST", path: "/api/shutdown", headers: { origin: EVIL } }), "forbidden_origin", "origin");
    expect((await rawRequest({ port: s.port, path: "/api/config" })).status).toBe(401);
  });
});

test("a reload applies a new allowed_hosts list", async () => {
  await withApi(`    listen: "127.0.0.1:0"`, async (s) => {
    const ask = (): Promise<RawResponse> => rawRequest({ port: s.port, path: "/api/healthz", headers: { host: "dns.example" } });
    expectRefused(await ask(), "forbidden_host", "before");
    writeFileSync(join(s.dir, "conf", "sluice.yaml"), `api:\n  http:\n    listen: "127.0.0.1:0"\n    allowed_hosts: [dns.example]\n`);
    expect((await rawRequest({ port: s.port, method: "POST", path: "/api/reload" })).status).toBe(202);
    for (let i = 0; i < 100 && (await ask()).status !== 200; i++) await new Promise((r) => setTimeout(r, 20));
    expect((await ask()).status).toBe(200);
  });
});

describe("api.http.limits.max_conns", () => {
  const open = (port: number): Promise<net.Socket> =>
    new Promise((resolve, reject) => {
      const sock = net.connect(port, "127.0.0.1", () => resolve(sock));
      sock.on("error", reject);
    });
  /** One keep-alive request on `sock`; resolves with the status line, or null when the server closed it instead. */
  const ask = (sock: net.Socket): Promise<string | null> =>
    new Promise((resolve) => {
      let got = "";
      const onData = (d: Buffer): void => {
        got += d.toString();
        if (got.includes("\r\n\r\n")) {
          sock.off("data", onData);
          resolve(got.split("\r\n")[0] ?? "");
        }
      };
      sock.on("data", onData);
      sock.once("close", () => resolve(null));
      sock.on("error", () => undefined);
      sock.write("GET /api/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    });

  test("connections beyond the cap are closed at once without an answer; the slot frees when one closes", async () => {
    await withApi(`    listen: "127.0.0.1:0"\n    limits: { max_conns: 3 }`, async (s) => {
      const held = await Promise.all([open(s.port), open(s.port), open(s.port)]);
      for (const sock of held) expect(await ask(sock)).toBe("HTTP/1.1 200 OK");
      const extra = await open(s.port);
      expect(await ask(extra)).toBeNull();
      held[0].destroy();
      let status: string | null = null;
      for (let i = 0; i < 50 && status === null; i++) {
        await new Promise((r) => setTimeout(r, 20));
        status = await ask(await open(s.port));
      }
      expect(status).toBe("HTTP/1.1 200 OK");
      for (const sock of held) sock.destroy();
    });
  });

  test("the default is 256", async () => {
    await withApi(`    listen: "127.0.0.1:0"`, async (s) => {
      expect(s.app.apiServer?.fastify.server.maxConnections).toBe(256);
    });
  });
});

test("sluice check names bad allowed_hosts entries and a max_conns below 1", async () => {
  const dir = tempDir();
  writeFileSync(join(dir, "hosts.yaml"), `api:\n  http:\n    listen: "127.0.0.1:0"\n    allowed_hosts: [ok.example, "http://x.example/", "fd00::1"]\n`);
  writeFileSync(join(dir, "conns.yaml"), `api:\n  http:\n    listen: "127.0.0.1:0"\n    limits: { max_conns: 0 }\n`);
  const hosts = await runCli(["check", "-c", join(dir, "hosts.yaml")]);
  expect(hosts.code).not.toBe(0);
  expect(hosts.stdout + hosts.stderr).toMatch(/allowed_hosts\[1\]: 'http:\/\/x\.example\/' is not a host name/);
  expect(hosts.stdout + hosts.stderr).toMatch(/allowed_hosts\[2\]: 'fd00::1' is not a host name/);
  const conns = await runCli(["check", "-c", join(dir, "conns.yaml")]);
  expect(conns.code).not.toBe(0);
  expect(conns.stdout + conns.stderr).toMatch(/max_conns/);
});
