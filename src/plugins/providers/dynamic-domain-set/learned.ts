// learn_domain with data-plane workers (docs/operations.md, "Using several cores"): the workers answer
// the queries and learn the names, while the primary alone writes the rule file and answers the API.
// Each worker keeps the keys it added or refreshed since its last report and, at its saver's turn
// (every flush_interval_ms), sends those rules to the primary. The primary adopts them (its file and
// its API have them from then on) and sends what it took to every worker, so a name one worker
// learned is matched by all within about a flush interval. On the query path this costs a Set.add
// when a name is added or its expiry moved on, in a worker only.

import type { ProcessRole } from "../../../registry/process-role.js";
import { parseRule, type DynamicRules } from "./store.js";

/** A learned rule as it travels between the processes of one instance. */
export interface LearnedRule {
  /** Canonical `full:` or `domain:` rule. */
  rule: string;
  added_at_ms: number;
  /** Unix ms on the set's clock; 0: never. */
  expires_at_ms: number;
}

export const LEARNED_MESSAGE = "dynset-learned";

/** The learned rules in a message from another process, checked (null: not what Sluice sends). */
export function learnedRulesOf(value: unknown): LearnedRule[] | null {
  if (!Array.isArray(value)) return null;
  const out: LearnedRule[] = [];
  for (const item of value as unknown[]) {
    const { rule, added_at_ms: added, expires_at_ms: expires } = (item ?? {}) as Record<string, unknown>;
    if (typeof rule !== "string" || typeof added !== "number" || typeof expires !== "number" || !Number.isFinite(added) || !Number.isFinite(expires)) return null;
    const parsed = parseRule(rule);
    if (!parsed.ok || parsed.key !== rule || (parsed.kind !== "full" && parsed.kind !== "domain")) return null;
    out.push({ rule, added_at_ms: added, expires_at_ms: expires });
  }
  return out;
}

export class LearnedRelay {
  /** Keys added or refreshed here since the last report (a worker's). */
  private readonly outbox = new Set<string>();
  private readonly unlisten: () => void = () => undefined;
  /** Whether learned keys are collected (this process is a worker). */
  readonly collecting: boolean;

  constructor(
    private readonly tag: string,
    private readonly store: DynamicRules,
    private readonly role: ProcessRole,
    private readonly maxEntries: number,
    /** The store took rules from another process (the rule gauge follows). */
    private readonly adopted: () => void,
  ) {
    this.collecting = role.kind === "worker";
    if (role.kind !== "single") this.unlisten = role.channel.listen(LEARNED_MESSAGE, tag, (m) => this.received(m.rules));
  }

  /** The query path (a worker's): `key` was added or its expiry moved on. Bounded by max_entries. */
  noted(key: string): void {
    if (this.outbox.size < this.maxEntries) this.outbox.add(key);
  }

  /** A worker's saver: sends the primary the rules learned since the last report; how many. */
  report(): number {
    if (this.role.kind !== "worker" || this.outbox.size === 0) return 0;
    const rules: LearnedRule[] = [];
    for (const key of this.outbox) {
      const r = this.store.learnedRule(key);
      if (r !== null) rules.push(r);
    }
    this.outbox.clear();
    if (rules.length > 0) this.role.channel.send({ t: LEARNED_MESSAGE, key: this.tag, rules });
    return rules.length;
  }

  /** A worker's rules (on the primary), or the primary's (on a worker). */
  private received(value: unknown): void {
    const rules = learnedRulesOf(value);
    if (rules === null) return;
    const taken = this.store.adopt(rules, this.maxEntries);
    if (taken.length === 0) return;
    this.adopted();
    // The primary passes on what it took: every worker, the one that learned it included (a no-op there).
    if (this.role.kind === "primary") this.role.channel.send({ t: LEARNED_MESSAGE, key: this.tag, rules: taken });
  }

  close(): void {
    this.unlisten();
  }
}
