// What the running server offers, from its own answers: GET /api/plugins (each plugin's type, kind,
// state and routes) and GET /api/openapi.json (every route). Pages and controls that depend on a
// plugin or route appear only when the server lists it; nothing is assumed or faked.

import { computed, signal } from "@preact/signals";
import { api, onSignOut } from "./api";
import type { PluginInfo, PluginsAnswer } from "./shapes";

export type { PluginInfo };

export const plugins = signal<PluginInfo[]>([]);
export const generation = signal<number>(0);
export const apiPaths = signal<ReadonlySet<string>>(new Set());
/** True once plugins and routes have been read (until then an optional page cannot be told from a missing one). */
export const capabilitiesRead = signal(false);

onSignOut(() => {
  plugins.value = [];
  generation.value = 0;
  apiPaths.value = new Set();
  capabilitiesRead.value = false;
});

/** True when `plugin` serves `METHOD /api/plugins/<tag>/<sub>`. */
export const serves = (plugin: PluginInfo, method: string, sub: string): boolean => plugin.routes.includes(`${method} /api/plugins/${plugin.tag}${sub ? `/${sub}` : ""}`);

/** Plugins serving a route, e.g. every query recorder (GET stats/timeseries). */
const servingAny = (method: string, sub: string): PluginInfo[] => plugins.value.filter((p) => serves(p, method, sub));

/** Which optional pages the server can back. */
export const capabilities = computed(() => ({
  // Overview and Query log read a query recorder's stats, records and stream routes.
  overview: servingAny("GET", "stats/timeseries"),
  records: servingAny("GET", "records"),
  // Cron jobs and downloads (the Cron & downloads page, and their cards on the Plugins page).
  cron: servingAny("GET", "jobs/status"),
  downloads: servingAny("GET", "downloads"),
  // The Clients page, names and group filters: the runtime's `clients` provider (at most one per configuration).
  clients: servingAny("GET", "clients"),
  // Upgrade check/apply (the System page's Upgrade card), only in builds with the upgrade feature.
  upgrade: apiPaths.value.has("/api/upgrade/status"),
}));

export async function loadPlugins(): Promise<PluginInfo[]> {
  const answer = await api<PluginsAnswer>("api/plugins");
  plugins.value = answer.plugins;
  generation.value = answer.generation;
  return answer.plugins;
}

export async function loadCapabilities(): Promise<void> {
  const [, doc] = await Promise.all([loadPlugins(), api<{ paths?: Record<string, unknown> }>("api/openapi.json")]);
  apiPaths.value = new Set(Object.keys(doc.paths ?? {}));
  capabilitiesRead.value = true;
}
