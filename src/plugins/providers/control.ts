// Every provider's control plane: a `provider:<tag>` actor (machines/provider.machine.ts) that
// runs one reload at a time, POST /api/plugins/<tag>/reload, and GET .../reload/status (rule count
// and reload history, for the dashboard). The `reload_provider` executor asks the same actor, so an
// API reload and a pipeline reload never overlap.

import { fromPromise } from "xstate";
import { providerMachine, type ProviderContext, type ProviderReloadOutput } from "../../../machines/provider.machine.js";
import { ActorGoneError, RefusedError, RouteError, type PluginControl, type PluginRoute } from "../../registry/control.js";
import type { ProviderPlugin } from "../../registry/types.js";
import { providerReloadedSchema, providerStatusSchema } from "./schemas.js";

/** Runs the provider's rebuild-and-swap and times it. */
async function reloadProvider(provider: ProviderPlugin, tag: string): Promise<ProviderReloadOutput> {
  if (typeof provider.reload !== "function") throw new Error(`provider '${tag}' cannot be reloaded`);
  const started = performance.now();
  const { rules } = await provider.reload();
  return { rules, duration_ms: Math.round(performance.now() - started) };
}

export const providerReloadRoute: PluginRoute<ProviderPlugin> = {
  method: "POST",
  role: "operator",
  path: "reload",
  audit: () => "reload its rules",
  summary: "Reload this provider's rules with its startup configuration; the old rules serve until the new ones are complete",
  errors: ["provider_reload_failed", "provider_reload_busy"],
  notFound: "provider_not_found",
  schema: { response: { 200: providerReloadedSchema } },
  async handle(_req, plugin) {
    try {
      const out = (await plugin.concern.ask({ type: "PROVIDER.RELOAD" })) as ProviderReloadOutput;
      return { ok: true, provider: plugin.tag, rules: out.rules, duration_ms: out.duration_ms };
    } catch (err) {
      // A refusal (busy) passes through to the guard table; the provider's own failure is a 400.
      if (err instanceof Error && !(err instanceof RefusedError) && !(err instanceof ActorGoneError)) {
        throw new RouteError("provider_reload_failed", `reloading '${plugin.tag}' failed; the previous rules keep serving: ${err.message}`);
      }
      throw err;
    }
  },
};

export const providerStatusRoute: PluginRoute<ProviderPlugin> = {
  method: "GET",
  role: "viewer",
  path: "reload/status",
  summary: "This provider's rule count and reload state",
  notFound: "provider_not_found",
  schema: { response: { 200: providerStatusSchema } },
  handle(_req, plugin) {
    const snap = plugin.concern.snapshot();
    const ctx = snap.context as ProviderContext;
    // The instance counts what serves now; the actor's figure is what its last reload reported.
    const rules = plugin.view.rules ?? ctx.rules;
    // A provider with its own concern (dynamic_domain_set) names the change it runs in `operation`.
    const reloading = snap.value === "reloading" || (snap.context as { operation?: unknown }).operation === "PROVIDER.RELOAD";
    return { ok: true, provider: plugin.tag, status: reloading ? "reloading" : "idle", rules, reloads: ctx.reloads, failures: ctx.failures, last_error: ctx.last_error };
  },
};

export const providerControl: PluginControl<ProviderPlugin> = {
  concern: (provider, env) => ({
    id: `provider:${env.tag}`,
    logic: providerMachine.provide({ actors: { reload: fromPromise(() => reloadProvider(provider, env.tag)) } }),
    input: { tag: env.tag, rules: provider.rules ?? null },
  }),
  routes: [providerReloadRoute, providerStatusRoute],
  shared: { events: ["PROVIDER.RELOAD"], replay: () => ({ type: "PROVIDER.RELOAD" }) },
};
