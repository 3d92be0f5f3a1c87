// `reload_provider`: reloads the listed providers (domain_set, ip_set, ...) in order, from a sequence.

import { Step } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin, type ProviderPlugin } from "../../registry/types.js";
import { parseProviderRefs, providerRefDependencies, type ProviderRef } from "../provider-refs.js";

type ReloadProviderArgs = string[];

/** Tokens of the list (split on commas and whitespace), each of which must be a `$provider`. */
const parseRefs = (args: ReloadProviderArgs): ProviderRef[] =>
  parseProviderRefs(args, (token) =>
    token.startsWith("&") ? "rule files cannot be reloaded here (reload the provider that reads them)" : "only $provider references are accepted",
  );

export const reloadProvider = definePlugin<ReloadProviderArgs, "executor">({
  type: "reload_provider",
  kind: "executor",
  feature: "core",
  summary: "Reloads the listed $providers in order; the first failure stops it and fails the query.",
  schema: { type: "array", minItems: 1, items: { type: "string" } },
  shorthand: (raw) => (typeof raw === "string" ? [raw] : raw === null || raw === undefined ? [] : raw),
  quickSetup: (param) => param,
  check: (args) => argProblems(() => parseRefs(args)),
  dependencies: (args) => providerRefDependencies(() => parseRefs(args)),
  create(args, ctx) {
    // Each reload goes through the provider's actor, so it never overlaps an API reload of the same provider.
    const targets = parseRefs(args).map((r) => {
      const provider: ProviderPlugin = ctx.provider(r.tag);
      if (typeof provider.reload !== "function") throw new ArgError(`provider '${r.tag}' cannot be reloaded`, r.at);
      const control = ctx.control(r.tag);
      return { tag: r.tag, reload: () => control.ask({ type: "PROVIDER.RELOAD" }) };
    });
    const labels = { plugin_tag: ctx.tag };
    const m = ctx.services.metrics;
    const attempts = m.counter("reload_provider_reload_total", "reload_provider: provider reloads attempted", ["plugin_tag"])(labels);
    const failures = m.counter("reload_provider_reload_error_total", "reload_provider: provider reloads that failed", ["plugin_tag"])(labels);
    return {
      async execute() {
        for (const t of targets) {
          attempts.value++;
          try {
            await t.reload();
          } catch (err) {
            failures.value++;
            throw new Error(`reload_provider: reloading '${t.tag}' failed: ${(err as Error).message}`, { cause: err });
          }
        }
        return Step.Next;
      },
    };
  },
});
