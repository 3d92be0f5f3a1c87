// A dynamic_domain_set's control plane: its `dynamic-set:<tag>` actor (machines/dynamic-set.machine.ts)
// bound to the instance's work, its routes (routes.ts, plus every provider's reload and reload/status),
// and the changes a cluster repeats on its other members.

import { fromPromise } from "xstate";
import { dynamicSetMachine, type DynamicSetInput, type DynamicSetOperation, type RuleChange } from "../../../../machines/dynamic-set.machine.js";
import type { ConcernEvent, PluginControl } from "../../../registry/control.js";
import { providerReloadRoute, providerStatusRoute } from "../control.js";
import { dynamicSetRoutes, MAX_RULE_TTL_MS } from "./routes.js";
import type { DynamicDomainSet } from "./set.js";
import { parseRule } from "./store.js";

/** The canonical form of a rule that came from elsewhere, or null when it is not one. */
function canonical(rule: unknown): string | null {
  if (typeof rule !== "string") return null;
  const parsed = parseRule(rule);
  return parsed.ok && parsed.key === rule ? rule : null;
}

/**
 * A change made through another member's API, checked (it comes from outside this process) and
 * brought to now: an added rule keeps its end (`at` + ttl), and one whose end has passed is left out.
 */
function replayChange(event: Record<string, unknown>, now: number): ConcernEvent | null {
  switch (event.type) {
    case "DYNSET.CLEAR":
      return { type: "DYNSET.CLEAR" };
    case "DYNSET.REMOVE": {
      if (!Array.isArray(event.rules)) return null;
      const rules = (event.rules as unknown[]).map(canonical);
      return rules.every((r) => r !== null) ? { type: "DYNSET.REMOVE", rules } : null;
    }
    case "DYNSET.ADD": {
      const at = event.at;
      if (!Array.isArray(event.rules) || typeof at !== "number") return null;
      const rules: RuleChange[] = [];
      for (const item of event.rules as unknown[]) {
        const { rule, ttl_ms: ttl } = (item ?? {}) as Record<string, unknown>;
        const key = canonical(rule);
        if (key === null) return null;
        if (ttl === null) rules.push({ rule: key, ttl_ms: null });
        else if (typeof ttl === "number" && ttl > 0 && ttl <= MAX_RULE_TTL_MS) {
          const left = at + ttl - now;
          if (left > 0) rules.push({ rule: key, ttl_ms: Math.min(left, MAX_RULE_TTL_MS) });
        } else return null;
      }
      return rules.length > 0 ? { type: "DYNSET.ADD", rules, at: now } : null;
    }
    default:
      return null;
  }
}

export const dynamicSetControl: PluginControl<DynamicDomainSet> = {
  concern: (set, env) => ({
    id: `dynamic-set:${env.tag}`,
    logic: dynamicSetMachine.provide({
      actors: {
        load: fromPromise(() => set.load()),
        operate: fromPromise(({ input }: { input: DynamicSetOperation }) => set.operate(input)),
        // The primary alone writes the file; a worker's write reports its learned rules to the primary (learned.ts).
        persist: fromPromise(() => set.persist()),
        sweep: fromPromise(() => set.sweep()),
      },
      guards: {
        dynamicSetChanged: () => set.unsaved,
        dynamicSetHasRoom: ({ event }) => event.type !== "DYNSET.ADD" || set.hasRoom(event.rules.map((r) => r.rule)),
      },
    }),
    input: { tag: env.tag, flushIntervalMs: set.settings.flushIntervalMs, cleanupIntervalMs: set.settings.cleanupIntervalMs } satisfies DynamicSetInput,
    // The first query after a start or reload already sees the file's rules.
    startup: true,
  }),
  routes: [...dynamicSetRoutes, providerReloadRoute, providerStatusRoute],
  shared: { events: ["DYNSET.ADD", "DYNSET.REMOVE", "DYNSET.CLEAR"], replay: replayChange },
};
