// A provider's routes through the API: POST .../reload and GET .../reload/status (rule count,
// reloads, failures, last error, and "reloading" while one runs), as the dashboard shows them.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { answerIps, query } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(
    `
api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: domain_set, args: { files: [ads.txt] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - tag: main
    type: sequence
    args:
      - { matches: $blocked, exec: "black_hole 0.0.0.0 short_circuit" }
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    { "ads.txt": "ads.example\ntracker.example\n" },
  );
});
afterAll(() => s.stop());

const json = async (path: string, init?: RequestInit): Promise<{ status: number; body: Record<string, unknown> }> => {
  const res = await s.api(path, init);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const status = (): Promise<{ status: number; body: Record<string, unknown> }> => json("/api/plugins/ads/reload/status");
const reload = (): Promise<{ status: number; body: Record<string, unknown> }> => json("/api/plugins/ads/reload", { method: "POST" });

test("status shows the rules serving now; a reload after the file changed updates the count and the answers", async () => {
  expect(await status()).toEqual({ status: 200, body: { ok: true, provider: "ads", status: "idle", rules: 2, reloads: 0, failures: 0, last_error: null } });
  writeFileSync(join(s.dir, "ads.txt"), "ads.example\ntracker.example\nnew.example\n");
  expect((await reload()).body).toMatchObject({ ok: true, provider: "ads", rules: 3 });
  expect((await status()).body).toEqual({ ok: true, provider: "ads", status: "idle", rules: 3, reloads: 1, failures: 0, last_error: null });
  expect(answerIps(await query(s.udpPort, "new.example"))).toEqual(["0.0.0.0"]);
});

test("a failed reload is counted with its error while the previous rules keep serving; a success clears the error", async () => {
  writeFileSync(join(s.dir, "ads.txt"), "full:\n");
  expect(await reload()).toMatchObject({ status: 400, body: { ok: false, code: "provider_reload_failed" } });
  const failed = (await status()).body;
  expect(failed).toMatchObject({ status: "idle", rules: 3, reloads: 1, failures: 1 });
  expect(failed.last_error).toContain("ads.txt:1");
  expect(answerIps(await query(s.udpPort, "new.example"))).toEqual(["0.0.0.0"]);

  writeFileSync(join(s.dir, "ads.txt"), "ads.example\n");
  expect((await reload()).status).toBe(200);
  expect((await status()).body).toMatchObject({ rules: 1, reloads: 2, failures: 1, last_error: null });
});

test("while a reload runs, status says reloading and a second reload is refused with 409", async () => {
  writeFileSync(join(s.dir, "ads.txt"), Array.from({ length: 300_000 }, (_, i) => `full:filler${i}.test`).join("\n") + "\n");
  const running = reload();
  // Sent right behind the reload: its rebuild of 300 000 rules yields to the event loop for a while.
  const [during, second] = await Promise.all([status(), reload()]);
  expect(during.body.status).toBe("reloading");
  expect(second).toMatchObject({ status: 409, body: { code: "provider_reload_busy" } });
  expect((await running).body).toMatchObject({ ok: true, rules: 300_000 });
  expect((await status()).body).toMatchObject({ status: "idle", rules: 300_000 });
});

test("only providers have the route: a matcher's or an unknown tag is 404 provider_not_found; OpenAPI lists it", async () => {
  expect(await json("/api/plugins/blocked/reload/status")).toMatchObject({ status: 404, body: { code: "provider_not_found" } });
  expect(await json("/api/plugins/nope/reload/status")).toMatchObject({ status: 404, body: { code: "provider_not_found" } });
  const doc = (await json("/api/openapi.json")).body as { paths: Record<string, { get?: { summary?: string } }> };
  expect(doc.paths["/api/plugins/{tag}/reload/status"]?.get?.summary).toBe("This provider's rule count and reload state");
  const plugins = (await json("/api/plugins")).body as { plugins: { tag: string; routes: string[] }[] };
  expect(plugins.plugins.find((p) => p.tag === "ads")?.routes).toEqual(["POST /api/plugins/ads/reload", "GET /api/plugins/ads/reload/status"]);
});
