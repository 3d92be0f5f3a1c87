// Health, build, control and system routes: status codes, content types and every field.
import { arch, cpus, platform, totalmem } from "node:os";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { VERSION } from "../../src/version.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { startCli } from "../helpers/cli.js";
import { apiYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

let s: RunningSluice;
beforeAll(async () => {
  s = await startSluice(apiYaml("reject REFUSED"));
});
afterAll(() => s.stop());

const json = async (path: string): Promise<{ status: number; body: Record<string, unknown>; type: string }> => {
  const res = await s.api(path);
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, type: res.headers.get("content-type") ?? "" };
};

describe("a serving instance", () => {
  test("healthz and readyz answer in plain text", async () => {
    const h = await s.api("/api/healthz");
    expect([h.status, await h.text(), h.headers.get("content-type")]).toEqual([200, "ok", "text/plain; charset=utf-8"]);
    const r = await s.api("/api/readyz");
    expect([r.status, await r.text()]).toEqual([200, "ready"]);
  });

  test("health carries every field of the record", async () => {
    const { status, body, type } = await json("/api/health");
    expect(status).toBe(200);
    expect(type).toMatch(/^application\/json/);
    expect(body).toEqual({
      status: "ok",
      version: VERSION,
      build_bundle: "full",
      uptime_ms: expect.any(Number) as number,
      checks: { api: "ok", plugin_init: "ok", server_startup: "ok" },
      plugins: { total: 3, servers: 2 },
    });
  });

  test("build lists bundles, features and the catalog's plugin types", async () => {
    const { body } = await json("/api/build");
    const build = body.build as Record<string, unknown>;
    expect(body.ok).toBe(true);
    expect(build.version).toBe(VERSION);
    expect(build.bundle).toBe("full");
    expect(build.enabled_bundles).toEqual(["minimal", "standard", "full"]);
    expect(build.enabled_features).toEqual(expect.arrayContaining(["core", "cache", "api"]));
    expect((build.enabled_features as string[]).every((f) => !f.startsWith("_"))).toBe(true);
    expect(build.supported_plugins).toEqual(createCatalog("full").supported());
    const executors = (build.supported_plugins as { executors: string[] }).executors;
    expect(executors).toEqual([...executors].sort());
    expect(executors).toContain("forward");
  });

  test("control shows the lifecycle state, the configuration and the reload record", async () => {
    const { body } = await json("/api/control");
    expect(body).toMatchObject({
      status: "running",
      state: "serving",
      config_path: join(s.dir, "sluice.yaml"),
      shutdown_requested: false,
      restart_requested: false,
      generation: 1,
      reload: { status: "idle", pending: false, in_progress: false, last_error: null },
    });
    expect(body.uptime_ms).toBeGreaterThanOrEqual(0);
    expect((body.reload as { running_version: string }).running_version).toMatch(/^[0-9a-f]{64}$/);
  });

  test("system reports real CPU and memory figures", async () => {
    await json("/api/system"); // first sample
    // Burn 300 ms of CPU in this process (it is the server), measuring the share it really got, then sample again.
    const wall0 = performance.now();
    const cpu0 = process.cpuUsage();
    let x = 0;
    const cpuMs = (): number => {
      const d = process.cpuUsage(cpu0);
      return (d.user + d.system) / 1000;
    };
    while (cpuMs() < 300) for (let i = 0; i < 10_000; i++) x += Math.sqrt(x + 1);
    expect(x).toBeGreaterThan(0);
    const share = (cpuMs() / (performance.now() - wall0) / cpus().length) * 100;
    const { body } = await json("/api/system");
    expect(body).toMatchObject({ ok: true, version: VERSION, os: platform(), arch: arch(), api_enabled: true, config_path: join(s.dir, "sluice.yaml") });
    expect((body.build as { bundle: string }).bundle).toBe("full");
    expect((body.reload as { status: string }).status).toBe("idle");
    // The server's figure is the share of all cores this process used since the first sample: what was just measured,
    // within scheduling noise (other work on the machine lowers both alike).
    expect(body.process_cpu_percent).toBeGreaterThan(share * 0.5);
    expect(body.process_cpu_percent).toBeLessThanOrEqual(Math.min(100, share * 1.5 + 5));
    const rss = process.memoryUsage.rss() / 1048576;
    expect(Math.abs((body.process_memory_mb as number) - rss)).toBeLessThan(rss * 0.5);
    expect(body.system_memory_total_mb).toBe(Math.round(totalmem() / 1048576));
  });

  test("reload: 202, then the status record moves to ok", async () => {
    const res = await s.api("/api/reload", { method: "POST" });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ ok: true, action: "reload", status: "accepted" });
    let st: Record<string, unknown> = {};
    for (let i = 0; i < 200 && st.status !== "ok"; i++) {
      st = (await json("/api/reload/status")).body;
      if (st.status !== "ok") await new Promise((r) => setTimeout(r, 10));
    }
    expect(st).toMatchObject({ status: "ok", pending: false, in_progress: false, last_error: null });
    expect(st.last_success_ms).toBe(st.last_completed_ms);
    expect(st.last_started_ms as number).toBeLessThanOrEqual(st.last_completed_ms as number);
    expect(Math.abs((st.last_completed_ms as number) - Date.now())).toBeLessThan(10_000); // Unix ms
  });
});

test("a configuration without servers is initialised but never ready", async () => {
  const t = await startSluice("api:\n  http: 127.0.0.1:0\nplugins:\n  - { tag: main, type: sequence, args: [{ exec: accept }] }\n");
  try {
    const health = await t.api("/api/health");
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "not_ready", checks: { plugin_init: "ok", server_startup: "not_ready" }, plugins: { total: 1, servers: 0 } });
    const ready = await t.api("/api/readyz");
    expect([ready.status, await ready.text()]).toEqual([503, "not_ready"]);
  } finally {
    await t.stop();
  }
});

test("while plugins are still initialising: healthz ok, readyz and health 503, a reload waits as pending", async () => {
  const dir = tempDir();
  writeFileSync(join(dir, "big.txt"), Array.from({ length: 400_000 }, (_, i) => `full:n${i}.test`).join("\n"));
  writeFileSync(join(dir, "sluice.yaml"), apiYaml("reject 3").replace("plugins:\n", "plugins:\n  - { tag: big, type: domain_set, args: { files: [big.txt] } }\n  - { tag: uses_big, type: qname, args: [$big] }\n"));
  const run = startCli(["-c", "sluice.yaml", "-d", dir]);
  try {
    const port = Number((await run.waitForLog((l) => l.msg === "management API listening")).port);
    const get = (path: string, method = "GET"): Promise<Response> => fetch(`http://127.0.0.1:${port}${path}`, { method });
    expect((await get("/api/healthz")).status).toBe(200);
    const ready = await get("/api/readyz");
    expect([ready.status, await ready.text()]).toEqual([503, "not_ready"]);
    const health = await get("/api/health");
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: "not_ready", checks: { api: "ok", plugin_init: "not_ready", server_startup: "not_ready" } });
    expect(((await (await get("/api/control")).json()) as { state: string }).state).toBe("initializing");
    // A reload asked for now waits until the first configuration is serving; a second one is refused.
    expect((await get("/api/reload", "POST")).status).toBe(202);
    expect(((await (await get("/api/reload/status")).json()) as { status: string }).status).toBe("pending");
    const again = await get("/api/reload", "POST");
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ ok: false, code: "reload_busy", message: "a reload is already pending or in progress" });
    await run.waitForLog((l) => l.msg === "reload succeeded", 20_000);
    expect((await get("/api/readyz")).status).toBe(200);
  } finally {
    run.child.kill("SIGKILL");
    await run.exited;
  }
});
