// Response records of the global routes, built from actor snapshots and the catalog.

import { arch, cpus, platform, totalmem } from "node:os";
import { lifecycleState, type ReloadStatus } from "../../machines/app.machine.js";
import { VERSION } from "../version.js";
import type { ApiHost } from "./host.js";

/** The reload status (kept by the app machine) with the spec's derived booleans. */
export interface ReloadRecord extends ReloadStatus {
  pending: boolean;
  in_progress: boolean;
  /** A replica's follower (--config-from). */
  follow?: Record<string, unknown>;
}

export function reloadRecord(host: ApiHost): ReloadRecord {
  const r = host.actor.getSnapshot().context.reload;
  const follow = host.followStatus();
  return { ...r, pending: r.status === "pending", in_progress: r.status === "in_progress", ...(follow ? { follow } : {}) };
}

/** The app machine's state, as the API names it. */
export function appState(host: ApiHost): string {
  const snap = host.actor.getSnapshot();
  return snap.status === "done" ? "stopped" : lifecycleState(snap.value);
}

/** Plugins are initialised once the app has reached serving (and while it reloads). */
export function pluginsReady(host: ApiHost): boolean {
  const s = appState(host);
  return (s === "serving" || s === "reloading") && host.liveRuntime() !== null;
}

export function serverCount(host: ApiHost): number {
  const rt = pluginsReady(host) ? host.liveRuntime() : null;
  return rt ? [...rt.plugins.values()].filter((p) => p.kind === "server").length : 0;
}

export function uptimeMs(host: ApiHost): number {
  return Date.now() - host.startedAt;
}

export function buildRecord(host: ApiHost): Record<string, unknown> {
  const b = host.catalog.build;
  return {
    version: VERSION,
    bundle: b.bundle,
    enabled_bundles: b.enabledBundles,
    enabled_features: b.enabledFeatures,
    supported_plugins: host.catalog.supported(),
  };
}

export function healthRecord(host: ApiHost): { body: Record<string, unknown>; ready: boolean } {
  const workers = host.workersStatus();
  // With data-plane workers, DNS is answered while one of them serves; fewer than expected is "degraded".
  const initialised = pluginsReady(host);
  const ready = initialised && (workers === null || workers.alive > 0);
  const servers = serverCount(host);
  const serverStartup = ready && servers > 0 ? "ok" : "not_ready";
  const pluginInit = initialised ? "ok" : "not_ready";
  const redis = host.redisStatus();
  return {
    ready,
    body: {
      status: pluginInit === "ok" && serverStartup === "ok" ? "ok" : "not_ready",
      version: VERSION,
      build_bundle: host.catalog.build.bundle,
      uptime_ms: uptimeMs(host),
      // Redis down leaves the instance serving from its local cache: reported, not "not_ready".
      checks: {
        api: "ok",
        plugin_init: pluginInit,
        server_startup: serverStartup,
        ...(redis.configured ? { redis: redis.ok ? "ok" : "down" } : {}),
        ...(workers ? { workers: workers.alive === workers.expected ? "ok" : workers.alive > 0 ? "degraded" : "down" } : {}),
      },
      plugins: { total: initialised ? (host.liveRuntime()?.plugins.size ?? 0) : 0, servers },
      ...(workers ? { workers } : {}),
    },
  };
}

export function controlRecord(host: ApiHost): Record<string, unknown> {
  const snap = host.actor.getSnapshot();
  const state = appState(host);
  const stopping = snap.context.shutdownRequested || snap.context.restartRequested || state === "shutting_down" || state === "restarting" || state === "stopped";
  return {
    status: stopping ? "shutdown_requested" : "running",
    state,
    uptime_ms: uptimeMs(host),
    config_path: host.configPath(),
    shutdown_requested: snap.context.shutdownRequested,
    restart_requested: snap.context.restartRequested,
    generation: snap.context.current ?? 0,
    reload: reloadRecord(host),
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

export function systemRecord(host: ApiHost): Record<string, unknown> {
  return {
    ok: true,
    version: VERSION,
    build: buildRecord(host),
    os: platform(),
    arch: arch(),
    uptime_ms: uptimeMs(host),
    config_path: host.configPath(),
    api_enabled: true,
    reload: reloadRecord(host),
    process_cpu_percent: cpu.percent(),
    process_memory_mb: Math.round((process.memoryUsage.rss() / 1048576) * 10) / 10,
    system_memory_total_mb: Math.round(totalmem() / 1048576),
  };
}
