// The built-in dashboard: served at / when api.http.webui is not configured (or true), off with
// `webui: false`, replaced by `webui.root`; its files, headers (no framing, own scripts only), the
// size of its JavaScript (under 150 KB gzipped) and no resource from another host.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { BUILTIN_WEBUI_ROOT } from "../../src/api/webui.js";
import { ConfigError } from "../../src/config/diagnostics.js";
import { jsonOf, rawRequest } from "../helpers/http.js";
import { startInWorkdir, type WorkdirSluice } from "../helpers/workdir.js";

const at = (listen = `"127.0.0.1:0"`, extra = ""): string => `api:\n  http:\n    listen: ${listen}\n${extra}`;
const assets = (): string[] => readdirSync(join(BUILTIN_WEBUI_ROOT, "assets"));

async function withSluice<T>(yaml: string, files: Record<string, string>, run: (s: WorkdirSluice) => Promise<T>): Promise<T> {
  const s = await startInWorkdir(yaml, files);
  try {
    return await run(s);
  } finally {
    await s.stop();
  }
}

describe("the built-in dashboard", () => {
  let s: WorkdirSluice;
  beforeAll(async () => {
    s = await startInWorkdir(at());
  });
  afterAll(() => s.stop());

  test("without a webui section, / serves the dashboard's index (no-cache) and its hashed assets (immutable)", async () => {
    const index = await rawRequest({ port: s.port, path: "/" });
    expect(index.status).toBe(200);
    expect(index.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(index.headers["cache-control"]).toBe("no-cache");
    expect(index.text).toBe(readFileSync(join(BUILTIN_WEBUI_ROOT, "index.html"), "utf8"));
    expect(index.text).toContain("<title>Sluice dashboard</title>");
    const script = /<script type="module" crossorigin src="\.\/assets\/([^"]+\.js)"><\/script>/.exec(index.text)?.[1];
    expect(script).toBeDefined();
    const js = await rawRequest({ port: s.port, path: `/assets/${script}` });
    expect(js.status).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    // Client-side routes (#/plugins) never reach the server; any other path falls back to the index.
    expect((await rawRequest({ port: s.port, path: "/plugins" })).text).toBe(index.text);
    // The API is unaffected.
    expect((await rawRequest({ port: s.port, path: "/api/healthz" })).text).toBe("ok");
  });

  test("its files forbid framing by other sites and load only their own scripts", async () => {
    for (const path of ["/", `/assets/${assets()[0]}`]) {
      const res = await rawRequest({ port: s.port, path });
      expect(res.headers["x-frame-options"], path).toBe("DENY");
      expect(res.headers["content-security-policy"], path).toContain("frame-ancestors 'none'");
      expect(res.headers["content-security-policy"], path).toContain("script-src 'self'");
      expect(res.headers["content-security-policy"], path).toContain("connect-src 'self'");
      expect(res.headers["x-content-type-options"], path).toBe("nosniff");
    }
  });
});

describe("the build", () => {
  test("the JavaScript is under 150 KB gzipped", () => {
    const js = assets().filter((f) => f.endsWith(".js"));
    expect(js.length).toBeGreaterThan(0);
    const gzipped = js.reduce((sum, f) => sum + gzipSync(readFileSync(join(BUILTIN_WEBUI_ROOT, "assets", f)), { level: 9 }).length, 0);
    expect(gzipped).toBeLessThan(150 * 1024);
    // Sanity: the bundle holds Preact and uPlot, not a stub.
    expect(gzipped).toBeGreaterThan(20 * 1024);
  });

  test("nothing is loaded from another host: no CDN, no web fonts", () => {
    const index = readFileSync(join(BUILTIN_WEBUI_ROOT, "index.html"), "utf8");
    expect([...index.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((u) => !u.startsWith("./") && !u.startsWith("data:"))).toEqual([]);
    for (const css of assets().filter((f) => f.endsWith(".css"))) {
      const text = readFileSync(join(BUILTIN_WEBUI_ROOT, "assets", css), "utf8");
      expect(text, css).not.toMatch(/@font-face|@import|url\(\s*["']?(https?:)?\/\//i);
    }
    for (const js of assets().filter((f) => f.endsWith(".js"))) {
      const text = readFileSync(join(BUILTIN_WEBUI_ROOT, "assets", js), "utf8");
      expect(text, js).not.toMatch(/import\s*\(?\s*["'`]https?:|fonts\.googleapis|cdn\.jsdelivr|unpkg\.com/);
    }
  });
});

describe("the webui setting", () => {
  test("webui: true is the built-in dashboard, like no section", async () => {
    await withSluice(at(undefined, "    webui: true\n"), {}, async (s) => {
      const res = await rawRequest({ port: s.port, path: "/" });
      expect(res.status).toBe(200);
      expect(res.text).toContain("<title>Sluice dashboard</title>");
    });
  });

  test("webui: false serves no files: / is a JSON 404", async () => {
    await withSluice(at(undefined, "    webui: false\n"), { "www/index.html": "x" }, async (s) => {
      const res = await rawRequest({ port: s.port, path: "/" });
      expect(res.status).toBe(404);
      expect(jsonOf(res)).toMatchObject({ ok: false, code: "not_found" });
      expect((await rawRequest({ port: s.port, path: `/assets/${assets()[0]}` })).status).toBe(404);
    });
  });

  test("webui.root replaces the dashboard (and its headers are not imposed on another site)", async () => {
    await withSluice(at(undefined, "    webui: { root: www }\n"), { "www/index.html": "<title>mine</title>" }, async (s) => {
      const res = await rawRequest({ port: s.port, path: "/" });
      expect(res.text).toBe("<title>mine</title>");
      expect(res.headers["content-security-policy"]).toBeUndefined();
      expect(res.headers["x-frame-options"]).toBeUndefined();
    });
  });

  test("any other value is a configuration error at its line", async () => {
    const err = await startInWorkdir(at(undefined, "    webui: 5\n")).then(
      (s) => s.stop().then(() => null),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).diagnostics[0]).toMatchObject({ line: 4, message: expect.stringContaining("'webui' must be boolean or object") as string });
  });
});
