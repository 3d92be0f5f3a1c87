// Response records of the global routes, built from actor snapshots and the catalog.

import { arch, cpus, platform, totalmem } from "node:os";
import type { App } from "../app/app.js";
import { VERSION } from "../app/version.js";

export interface ReloadRecord {
  status: "idle" | "pending" | "in_progress" | "ok" | "failed";
  pending: boolean;
  in_progress: boolean;
  last_started_ms: number | null;
  last_completed_ms: number | null;
  last_success_ms: number | null;
  last_error: string | null;
  running_version: string | null;
  target_version: string | null;
}

export function reloadRecord(app: App): ReloadRecord {
  const snap = app.reloadActor.getSnapshot();
  const status = snap.value;
  return { status, pending: status === "pending", in_progress: status === "in_progress", ...snap.context };
}

/** The app machine's state, as the API names it. */
export function appState(app: App): string {
  const snap = app.actor.getSnapshot();
  return snap.status === "done" ? "stopped" : String(snap.value);
}

/** Plugins are initialised once the app has reached serving (and while it reloads). */
export function pluginsReady(app: App): boolean {
  const s = appState(app);
  return s === "serving" || s === "reloading";
}

export function serverCount(app: App): number {
  if (!pluginsReady(app)) return 0;
  return [...app.runtime.plugins.values()].filter((p) => p.kind === "server").length;
}

export function uptimeMs(app: App): number {
  return Date.now() - app.startedAt;
}

export function buildRecord(app: App): Record<string, unknown> {
  const b = app.catalog.build;
  return {
    version: VERSION,
    bundle: b.bundle,
    enabled_bundles: b.enabledBundles,
    enabled_features: b.enabledFeatures,
    supported_plugins: app.catalog.supported(),
  };
}

export function healthRecord(app: App): { body: Record<string, unknown>; ready: boolean } {
  const ready = pluginsReady(app);
  const servers = serverCount(app);
  const serverStartup = ready && servers > 0 ? "ok" : "not_ready";
  const pluginInit = ready ? "ok" : "not_ready";
  return {
    ready,
    body: {
      status: pluginInit === "ok" && serverStartup === "ok" ? "ok" : "not_ready",
      version: VERSION,
      build_bundle: app.catalog.build.bundle,
      uptime_ms: uptimeMs(app),
      checks: { api: "ok", plugin_init: pluginInit, server_startup: serverStartup },
      plugins: { total: ready ? app.runtime.plugins.size : 0, servers },
    },
  };
}

export function controlRecord(app: App): Record<string, unknown> {
  const snap = app.actor.getSnapshot();
  const state = appState(app);
  const stopping = snap.context.shutdownRequested || snap.context.restartRequested || state === "shutting_down" || state === "restarting" || state === "stopped";
  return {
    status: stopping ? "shutdown_requested" : "running",
    state,
    uptime_ms: uptimeMs(app),
    config_path: app.config.path,
    shutdown_requested: snap.context.shutdownRequested,
    restart_requested: snap.context.restartRequested,
    generation: app.generation,
    reload: reloadRecord(app),
  };
}

/** CPU use since the previous call (or since start), as a share of all cores, in percent. */
class CpuSampler {
  private last = { at: performance.now(), usage: process.cpuUsage() };
  private readonly origin = { at: performance.now() - process.uptime() * 1000, usage: { user: 0, system: 0 } };

  percent(): number {
    const now = { at: performance.now(), usage: process.cpuUsage() };
    // Less than 100 ms since the last sample says too little: measure from the start instead.
    const base = now.at - this.last.at < 100 ? this.origin : this.last;
    const cpuMs = (now.usage.user - base.usage.user + now.usage.system - base.usage.system) / 1000;
    const wallMs = now.at - base.at;
    if (base === this.last) this.last = now;
    return wallMs > 0 ? Math.round((cpuMs / wallMs / Math.max(1, cpus().length)) * 100 * 100) / 100 : 0;
  }
}
const cpu = new CpuSampler();

export function systemRecord(app: App): Record<string, unknown> {
  return {
    ok: true,
    version: VERSION,
    build: buildRecord(app),
    os: platform(),
    arch: arch(),
    uptime_ms: uptimeMs(app),
    config_path: app.config.path,
    api_enabled: true,
    reload: reloadRecord(app),
    process_cpu_percent: cpu.percent(),
    process_memory_mb: Math.round((process.memoryUsage.rss() / 1048576) * 10) / 10,
    system_memory_total_mb: Math.round(totalmem() / 1048576),
  };
}

export type ReloadRequest = "accepted" | "stopping" | "busy";

/**
 * Asks for a reload as POST /api/reload and PUT /api/config {reload:true} both do: the app must
 * still be able to run one (not stopping), and no reload may be pending or running.
 */
export function requestReload(app: App): ReloadRequest {
  const appSnap = app.actor.getSnapshot();
  if (appSnap.status !== "active" || !appSnap.can({ type: "RELOAD.REQUEST" })) return "stopping";
  if (!app.reloadActor.getSnapshot().can({ type: "RELOAD.REQUEST" })) return "busy";
  app.actor.send({ type: "RELOAD.REQUEST" });
  return "accepted";
}
