// The running configuration's dynamic_domain_set plugins (from GET /api/plugins), what the Query log's
// "Block" and "Allow" add a name to, and the pieces of their rules routes both the Query log and the
// Plugins page use. Which set each action adds to is the operator's choice, remembered for this tab
// (sessionStorage) and forgotten at sign-out; a set whose tag says "block" or "allow" is preselected.

import { computed, signal } from "@preact/signals";
import { ApiFailure, onSignOut } from "./api";
import { plugins, serves, type PluginInfo } from "./features";

/** The dynamic_domain_sets whose rules can be changed (their routes are served: the set is loaded). */
export const domainSets = computed(() => plugins.value.filter((p) => p.type === "dynamic_domain_set" && serves(p, "POST", "rules")));

export type SetAction = "block" | "allow";
export type Choice = Partial<Record<SetAction, string>>;

const STORE_KEY = "sluice.domainSetChoice";

function storedChoice(): Choice {
  try {
    const raw: unknown = JSON.parse(sessionStorage.getItem(STORE_KEY) ?? "{}");
    if (raw === null || typeof raw !== "object") return {};
    const out: Choice = {};
    if ("block" in raw && typeof raw.block === "string") out.block = raw.block;
    if ("allow" in raw && typeof raw.allow === "string") out.allow = raw.allow;
    return out;
  } catch {
    return {};
  }
}

/** The set the operator picked for each action in this tab. */
export const setChoice = signal<Choice>(storedChoice());

export function chooseSet(action: SetAction, tag: string): void {
  const next = { ...setChoice.value, [action]: tag };
  setChoice.value = next;
  try {
    sessionStorage.setItem(STORE_KEY, JSON.stringify(next));
  } catch {
    // Storage disabled: the choice holds for this page only.
  }
}

onSignOut(() => {
  setChoice.value = {};
  try {
    sessionStorage.removeItem(STORE_KEY);
  } catch {
    // Nothing stored.
  }
});

const HINTS: Record<SetAction, RegExp> = { block: /block|deny|reject|black/i, allow: /allow|white|pass|trust/i };

/**
 * The set `action` adds to: the operator's pick while that set is still configured; else the first set
 * whose tag hints at the action and not at the other one ("blocked", "allowlist"); else none (the
 * operator picks: the dashboard cannot know how a set is used in the pipeline).
 */
export function setFor(action: SetAction, sets: PluginInfo[], choice: Choice): string | null {
  const picked = choice[action];
  if (picked !== undefined && sets.some((p) => p.tag === picked)) return picked;
  const other: SetAction = action === "block" ? "allow" : "block";
  return sets.find((p) => HINTS[action].test(p.tag) && !HINTS[other].test(p.tag))?.tag ?? null;
}

/** A query name as a rule's pattern: lower case, without the root's trailing dot. */
export const ruleName = (qname: string): string => qname.trim().toLowerCase().replace(/\.$/, "");

/** One rule (or the request's ttl: index null) the API refused, from `errors` of a 400 invalid_rules. */
export interface RuleProblem {
  index: number | null;
  rule: string | null;
  message: string;
}

const isProblem = (v: unknown): v is RuleProblem =>
  typeof v === "object" &&
  v !== null &&
  "message" in v &&
  typeof v.message === "string" &&
  "index" in v &&
  (v.index === null || typeof v.index === "number") &&
  "rule" in v &&
  (v.rule === null || typeof v.rule === "string");

/** The rules a 400 invalid_rules names, or [] for any other error. */
export function ruleProblems(err: unknown): RuleProblem[] {
  if (!(err instanceof ApiFailure) || err.code !== "invalid_rules") return [];
  const list = err.body.errors;
  return Array.isArray(list) ? list.filter(isProblem) : [];
}

/** How long an added rule lives, as the API's `ttl` ("" or absent: until removed). */
export const TTL_CHOICES: { value: string; label: string }[] = [
  { value: "", label: "until removed" },
  { value: "1h", label: "1 hour" },
  { value: "24h", label: "1 day" },
  { value: "7d", label: "7 days" },
];
