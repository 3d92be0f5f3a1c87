// The instance of a dynamic_domain_set: what queries ask (containsName/containsQuestion, like a
// domain_set), what `learn_domain` calls (learn: an in-memory insert), and the work its concern actor
// runs (machines/dynamic-set.machine.ts): the start-up load, the API's changes, the writes and sweeps.

import type { Question } from "../../../dns/message.js";
import { normalizeName } from "../../../dns/name.js";
import type { DynamicSetOperation, DynamicSetPersisted } from "../../../../machines/dynamic-set.machine.js";
import type { Cell } from "../../../observability/metrics.js";
import type { Logger } from "../../../observability/logger.js";
import type { ProcessRole } from "../../../registry/process-role.js";
import type { ControlHandle, ProviderPlugin } from "../../../registry/types.js";
import { LearnedRelay } from "./learned.js";
import { readRulesFile, releaseStore, sameStamp, stampOf, withFileLock, writeRulesFile, type SharedStore } from "./file.js";
import { parseRule, type DynamicRules, type LearnOutcome, type ParsedRule, type RulePage } from "./store.js";

export interface DynamicSetSettings {
  /** The file as configured (messages) and resolved against the working directory. */
  shownPath: string;
  path: string;
  maxEntries: number;
  /** Expiry of a learned rule when `learn_domain` sets none (null: never). */
  entryTtlMs: number | null;
  flushIntervalMs: number;
  cleanupIntervalMs: number;
  /** Written when the file does not exist. */
  bootstrap: Extract<ParsedRule, { ok: true }>[];
}

export interface DynamicSetCells {
  rules: Cell;
  expired: Cell;
  writeOk: Cell;
  writeError: Cell;
}

export class DynamicDomainSet implements ProviderPlugin {
  /** Read by every query; the same object across a configuration reload (file.ts). */
  private readonly store: DynamicRules;
  /** With data-plane workers: learned rules go from the workers to the primary and back to all (learned.ts). */
  private readonly relay: LearnedRelay;

  constructor(
    readonly tag: string,
    readonly settings: DynamicSetSettings,
    private readonly shared: SharedStore,
    private readonly log: Logger,
    private readonly cells: DynamicSetCells,
    private readonly self: ControlHandle,
    private readonly role: ProcessRole,
  ) {
    this.store = shared.store;
    this.relay = new LearnedRelay(tag, this.store, role, settings.maxEntries, () => (cells.rules.value = this.store.size));
  }

  containsName(name: string): boolean {
    return this.store.has(name);
  }

  containsQuestion(q: Question): boolean {
    return this.store.has(normalizeName(q.name));
  }

  /** Rules held now (expired ones count until the sweep removes them). */
  get rules(): number {
    return this.store.size;
  }

  /** Unix ms on the set's clock (the process clock plus services.clockShift). */
  now(): number {
    return this.store.clock();
  }

  /** The query path of `learn_domain`: `ttlMs` undefined takes entry_ttl_seconds. Never waits, never sends an event. */
  learn(name: string, kind: "full" | "domain", ttlMs: number | undefined): LearnOutcome {
    const out = this.store.learn(name, kind, ttlMs === undefined ? this.settings.entryTtlMs : ttlMs, this.settings.maxEntries);
    if (this.relay.collecting && (out === "added" || out === "refreshed")) this.relay.noted(`${kind}:${name}`);
    return out;
  }

  /** Whether adding these rules keeps the set within max_entries (rules already there take no room). */
  hasRoom(keys: readonly string[]): boolean {
    const fresh = this.store.newKeys(keys);
    return fresh === 0 || this.store.size + fresh <= this.settings.maxEntries;
  }

  get unsaved(): boolean {
    return this.store.unsaved;
  }

  list(opts: { cursor: number; limit: number; q: string | null }): RulePage {
    return this.store.list(opts);
  }

  status(): { rules: number; by_source: Record<string, number>; unsaved_changes: boolean } {
    const by = this.store.countBySource();
    return { rules: by.api + by.learned + by.bootstrap + by.file, by_source: by, unsaved_changes: this.store.unsaved };
  }

  private liveCount(): number {
    return this.status().rules;
  }

  /** Start-up: the rules of the file (or bootstrap_rules, written out), or, after a configuration reload, the live ones. */
  load(): Promise<number> {
    return withFileLock(this.shared, async () => {
      if (this.shared.loaded) {
        if (sameStamp(this.shared.stamp, await stampOf(this.settings.path))) {
          this.log.info({ rules: this.store.size }, "dynamic_domain_set carries on with the live rules");
          return this.store.size;
        }
        this.log.info({ path: this.settings.path }, "the rule file changed since it was last read or written; reading it");
      }
      const n = await this.readFile();
      this.shared.loaded = true;
      return n;
    });
  }

  /** POST reload and reload_provider: the file as it is now replaces the rules (changes not yet written are lost). */
  reload(): Promise<{ rules: number }> {
    return withFileLock(this.shared, async () => ({ rules: await this.readFile() }));
  }

  /** Reads the file into the store; a missing file gets bootstrap_rules and is written. Runs under the file lock. */
  private async readFile(): Promise<number> {
    const started = performance.now();
    const { path, shownPath, maxEntries } = this.settings;
    const now = this.store.clock();
    const read = await readRulesFile(path, shownPath, now);
    if (read === null) {
      await this.store.replace(this.settings.bootstrap.map((parsed) => ({ parsed, addedAt: now, expiresAt: 0, source: "bootstrap" as const })));
      await this.writeFile();
      this.log.info({ path, rules: this.store.size }, "dynamic_domain_set created its rule file");
      this.cells.rules.value = this.store.size;
      return this.store.size;
    }
    const rules = read.rules;
    const live = rules.filter((r) => r.expiresAt === 0 || r.expiresAt > now);
    const kept = live.length > maxEntries ? live.slice(0, maxEntries) : live;
    await this.store.replace(kept);
    // The file says what the store holds unless expired or surplus rules were left out: then it is written again.
    if (kept.length === rules.length) this.store.savedVersion = this.store.version;
    if (live.length > maxEntries) this.log.warn({ path, rules: live.length, max_entries: maxEntries }, "the rule file holds more rules than max_entries; the first ones are kept");
    this.shared.stamp = read.stamp;
    this.cells.rules.value = this.store.size;
    this.log.info({ path, rules: this.store.size, ms: Math.round(performance.now() - started) }, "dynamic_domain_set loaded");
    return this.store.size;
  }

  /** Writes the live rules atomically. Runs under the file lock. */
  private async writeFile(): Promise<number> {
    const version = this.store.version;
    const { count, stamp } = await writeRulesFile(this.settings.path, this.tag, this.store);
    if (version > this.store.savedVersion) this.store.savedVersion = version;
    this.shared.stamp = stamp;
    return count;
  }

  /**
   * The saver's write, and the last one at stop: skipped when the file already holds what the store does
   * (a reload read it meanwhile, or the other generation of a configuration reload wrote it), so a stop
   * does not rewrite a file someone may have just edited. A data-plane worker writes no file: it
   * reports what it learned to the primary, which does.
   */
  async persist(): Promise<DynamicSetPersisted> {
    if (this.role.kind === "worker") {
      this.relay.report();
      this.store.savedVersion = this.store.version;
      return { at_ms: Date.now(), rules: this.store.size };
    }
    try {
      const rules = await withFileLock(this.shared, () => (this.store.unsaved ? this.writeFile() : Promise.resolve(this.store.size)));
      this.cells.writeOk.value++;
      this.cells.rules.value = this.store.size;
      return { at_ms: Date.now(), rules };
    } catch (err) {
      this.cells.writeError.value++;
      this.log.warn({ path: this.settings.path, err: (err as Error).message }, "writing the rule file failed; the rules serve on and the write is tried again");
      throw err;
    }
  }

  async sweep(): Promise<number> {
    const n = await this.store.sweep();
    if (n > 0) {
      this.cells.expired.value += n;
      this.cells.rules.value = this.store.size;
      this.log.debug({ expired: n }, "dynamic_domain_set removed expired rules");
    }
    return n;
  }

  /** One API change (the concern runs one at a time); rules arrive validated and canonical. */
  async operate(op: DynamicSetOperation): Promise<unknown> {
    switch (op.type) {
      case "DYNSET.ADD": {
        const rules = op.rules.map((r) => {
          const parsed = parseRule(r.rule);
          if (!parsed.ok) throw new Error(parsed.message);
          return { parsed, ttlMs: r.ttl_ms };
        });
        const out = await this.store.add(rules, "api", op.at);
        this.cells.rules.value = this.store.size;
        return { ...out, total: this.liveCount() };
      }
      case "DYNSET.REMOVE": {
        const out = await this.store.remove(op.rules);
        this.cells.rules.value = this.store.size;
        return { ...out, total: this.liveCount() };
      }
      case "DYNSET.CLEAR": {
        const removed = this.store.clear();
        this.cells.rules.value = 0;
        return { removed, total: 0 };
      }
      case "PROVIDER.RELOAD": {
        const started = performance.now();
        const { rules } = await this.reload();
        return { rules, duration_ms: Math.round(performance.now() - started) };
      }
    }
  }

  /** Waits for the concern's last write, then lets go of the store. */
  async destroy(): Promise<void> {
    await this.self.ask({ type: "DYNSET.STOP" }).catch(() => undefined);
    this.relay.close();
    releaseStore(this.shared);
  }
}
