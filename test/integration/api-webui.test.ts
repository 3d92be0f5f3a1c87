// The static WebUI at /: root relative to the working directory, content types, cache headers,
// directory indexes, SPA fallback, traversal attempts, methods, and /api never served from files.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { jsonOf, rawRequest, type RawResponse } from "../helpers/http.js";
import { startInWorkdir, type WorkdirSluice } from "../helpers/workdir.js";

const SECRET = "TOP-SECRET-OUTSIDE-THE-ROOT";
const LEAK = "SIBLING-DIRECTORY-LEAK";
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]);
const IMMUTABLE = "public, max-age=31536000, immutable";

const tree = {
  "www/index.html": "<title>root index</title>",
  "www/app.js": "export const x = 1;",
  "www/style.css": "body{}",
  "www/logo.svg": "<svg/>",
  "www/img.png": PNG,
  "www/data.bin": "binary",
  "www/docs/index.html": "<title>docs index</title>",
  "www/empty/.keep": "",
  "www/api/healthz": "file named like an API path",
  "www/api/leak.json": '{"from":"file"}',
  // The config lives in conf/: a root resolved against the config directory would find this one.
  "conf/www/index.html": "<title>WRONG: resolved against the config directory</title>",
  "secret.txt": SECRET,
  "wwwx/leak.txt": LEAK,
};

let s: WorkdirSluice;
beforeAll(async () => {
  s = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: { root: www }\n`, tree);
});
afterAll(() => s.stop());

const get = (path: string, method = "GET"): Promise<RawResponse> => rawRequest({ port: s.port, path, method });

describe("serving files", () => {
  test("webui.root resolves against the working directory (-d), and / serves the default index.html with no-cache", async () => {
    const res = await get("/");
    expect(res.status).toBe(200);
    expect(res.text).toBe("<title>root index</title>");
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers["cache-control"]).toBe("no-cache");
    expect((await get("/index.html")).headers["cache-control"]).toBe("no-cache");
  });

  test("files get their content type and a long immutable cache lifetime", async () => {
    const cases: [string, string, string | Buffer][] = [
      ["/app.js", "text/javascript; charset=utf-8", "export const x = 1;"],
      ["/style.css", "text/css; charset=utf-8", "body{}"],
      ["/logo.svg", "image/svg+xml", "<svg/>"],
      ["/img.png", "image/png", PNG],
      ["/data.bin", "application/octet-stream", "binary"],
      ["/app.js?v=123", "text/javascript; charset=utf-8", "export const x = 1;"],
    ];
    for (const [path, type, body] of cases) {
      const res = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers["content-type"], path).toBe(type);
      expect(res.headers["cache-control"], path).toBe(IMMUTABLE);
      expect(res.body.equals(Buffer.isBuffer(body) ? body : Buffer.from(body)), path).toBe(true);
    }
  });

  test("a directory serves its own index (no-cache); one without an index falls back to the root index", async () => {
    for (const path of ["/docs", "/docs/"]) {
      const res = await get(path);
      expect(res.text, path).toBe("<title>docs index</title>");
      expect(res.headers["cache-control"], path).toBe("no-cache");
    }
    expect((await get("/empty/")).text).toBe("<title>root index</title>");
  });

  test("an unknown path falls back to the index (single-page app routing)", async () => {
    for (const path of ["/settings", "/app/deep/route?tab=2", "/missing.js"]) {
      const res = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.text, path).toBe("<title>root index</title>");
      expect(res.headers["cache-control"], path).toBe("no-cache");
    }
  });

  test("HEAD answers with the headers and no body", async () => {
    const res = await get("/app.js", "HEAD");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(res.body.length).toBe(0);
  });
});

describe("what is refused", () => {
  test("traversal attempts never leave the root: 404, and never a file outside it", async () => {
    const attempts = [
      "/../secret.txt",
      "/%2e%2e/secret.txt",
      "/%2E%2E/secret.txt",
      "/.%2e/secret.txt",
      "/..%2fsecret.txt",
      "/%2e%2e%2fsecret.txt",
      "/docs/../../secret.txt",
      "/docs/..%2f..%2fsecret.txt",
      "/..%5csecret.txt",
      "/%5c..%5csecret.txt",
      "/docs%5c..%5c..%5csecret.txt",
      "/..\\secret.txt",
      "/../wwwx/leak.txt",
      "/..%2fwwwx%2fleak.txt",
      "/secret.txt%00.html",
      "/%00",
      "/index.html%00",
      "/%zz",
      "/%",
      "/%e0%a4%a",
      "/./index.html",
    ];
    for (const path of attempts) {
      const res = await get(path);
      expect(res.status, path).toBe(404);
      expect(jsonOf(res), path).toMatchObject({ ok: false, code: "not_found" });
      expect(res.text, path).not.toContain(SECRET);
      expect(res.text, path).not.toContain(LEAK);
    }
  });

  test("absolute-looking paths stay inside the root (they fall back to the index)", async () => {
    for (const path of ["//etc/passwd", "/%2fetc%2fpasswd", "/....//secret.txt", `/${"x/".repeat(50)}secret.txt`]) {
      const res = await get(path);
      expect(res.text, path).toBe("<title>root index</title>");
    }
  });

  test("methods other than GET and HEAD get 405 with Allow", async () => {
    for (const [method, path] of [["POST", "/"], ["PUT", "/app.js"], ["DELETE", "/index.html"], ["PATCH", "/settings"], ["OPTIONS", "/"]] as const) {
      const res = await get(path, method);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.allow).toBe("GET, HEAD");
      expect(jsonOf(res)).toMatchObject({ ok: false, code: "method_not_allowed" });
    }
  });

  test("/api paths are never served from the WebUI, even when a file with that name exists", async () => {
    for (const path of ["/api/leak.json", "/api", "/%61pi/leak.json", "/api%2fleak.json"]) {
      const res = await get(path);
      expect(res.status, path).toBe(404);
      expect(res.text, path).not.toContain("from");
      expect(jsonOf(res), path).toMatchObject({ ok: false, code: "not_found" });
    }
    const route = await get("/api/healthz");
    expect(route.text).toBe("ok");
  });
});

describe("other settings", () => {
  test("webui.index names the index file for /, directories and the SPA fallback", async () => {
    const t = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: { root: site, index: app.html }\n`, {
      "site/app.html": "<title>app</title>",
      "site/index.html": "<title>not the index</title>",
      "site/sub/app.html": "<title>sub app</title>",
    });
    try {
      const at = (path: string): Promise<RawResponse> => rawRequest({ port: t.port, path });
      expect((await at("/")).text).toBe("<title>app</title>");
      expect((await at("/")).headers["cache-control"]).toBe("no-cache");
      expect((await at("/sub/")).text).toBe("<title>sub app</title>");
      expect((await at("/client/route")).text).toBe("<title>app</title>");
      const other = await at("/index.html");
      expect(other.text).toBe("<title>not the index</title>");
      expect(other.headers["cache-control"]).toBe(IMMUTABLE);
    } finally {
      await t.stop();
    }
  });

  test("a webui.root that does not exist logs a warning and answers 404", async () => {
    const t = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: { root: nowhere }\n`);
    try {
      expect(t.logs.find((l) => l.target === "api" && String(l.msg).includes("webui.root is not a directory"))).toMatchObject({ level: 40 });
      const res = await rawRequest({ port: t.port, path: "/" });
      expect(res.status).toBe(404);
    } finally {
      await t.stop();
    }
  });

  test("webui.index must name a file: `..` and a path are configuration errors", async () => {
    for (const index of ["..", "sub/index.html"]) {
      const err = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: { root: www, index: "${index}" }\n`).then(
        (t) => t.stop().then(() => null),
        (e: unknown) => e,
      );
      expect(err, index).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).diagnostics[0]?.line, index).toBe(4);
    }
  });

  // Without a webui section the built-in dashboard is served (webui-builtin.test.ts); `false` turns the WebUI off.
  test("with webui: false, / is a JSON 404", async () => {
    const t = await startInWorkdir(`api:\n  http:\n    listen: "127.0.0.1:0"\n    webui: false\n`, { "www/index.html": "x" });
    try {
      const res = await rawRequest({ port: t.port, path: "/" });
      expect(res.status).toBe(404);
      expect(jsonOf(res)).toMatchObject({ ok: false, code: "not_found" });
    } finally {
      await t.stop();
    }
  });
});
