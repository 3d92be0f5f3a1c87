// One `ipset` or `nftset` instance: the executor (it queues the answer's prefixes and goes on) and
// the write its actor invokes (one batch, one run of the tool). Shared by both types; what differs is
// the program, its arguments and how a batch is written out (render.ts).

import type { Logger } from "pino";
import type { WriteOutcome } from "../../../../machines/set-writer.machine.js";
import { Step, type StepResult } from "../../../engine/types.js";
import type { Cell } from "../../../observability/metrics.js";
import type { CreateContext, ExecutorPlugin } from "../../../registry/types.js";
import { observer } from "./observe.js";
import { RecentPrefixes, SetQueue, type QueuedEntry } from "./queue.js";
import type { WriterSettings } from "./settings.js";
import { runTool, TOOL_TIMEOUT_MS } from "./tool.js";

/** Most prefixes remembered as written recently. */
export const RECENT_LIMIT = 65_536;

export interface SetsTool {
  /** The argv: program (resolved), leading arguments, then the tool's own (`restore -exist`, `-f -`). */
  argv: string[];
  /** The batch as the tool's stdin. */
  render(batch: readonly QueuedEntry[]): string;
}

export interface SetsPlugin extends ExecutorPlugin {
  readonly queue: SetQueue;
  readonly settings: WriterSettings;
  /** Takes at most one batch and writes it (the actor's `write`). */
  write(): Promise<WriteOutcome>;
}

interface Counters {
  entries: Cell;
  dropped: Cell;
  writes: Cell;
  errors: Cell;
}

function counters(type: string, ctx: CreateContext): Counters {
  const m = ctx.services.metrics;
  const labels = { plugin_tag: ctx.tag };
  return {
    entries: m.counter(`${type}_entries_total`, `${type}: prefixes queued for writing (new, or due to be written again)`, ["plugin_tag"])(labels),
    dropped: m.counter(`${type}_dropped_total`, `${type}: prefixes dropped because the queue was full`, ["plugin_tag"])(labels),
    writes: m.counter(`${type}_write_total`, `${type}: batches written (one run of the tool each)`, ["plugin_tag"])(labels),
    errors: m.counter(`${type}_write_error_total`, `${type}: batches the tool failed to write`, ["plugin_tag"])(labels),
  };
}

export function createSetsPlugin(type: string, settings: WriterSettings, masks: { mask4: number | null; mask6: number | null }, tool: SetsTool, ctx: CreateContext): SetsPlugin {
  const c = counters(type, ctx);
  const queue = new SetQueue(settings.queueSize, settings.batchSize);
  const recent = new RecentPrefixes(RECENT_LIMIT);
  const clockShift = ctx.services.clockShift;
  const observe = observer({ ...masks, timeout: settings.timeout, queue, recent, clockShift, entries: c.entries, dropped: c.dropped });
  const log: Logger = ctx.log;
  let failing = false;
  /** Entries whose write has ended (written or failed), and the destroy waiting for a count of them. */
  let settled = 0;
  let waiter: { upTo: number; resolve: () => void } | null = null;

  return {
    queue,
    settings,
    execute(dns): StepResult {
      observe(dns);
      return Step.Next;
    },
    async write(): Promise<WriteOutcome> {
      const batch = queue.take(settings.batchSize);
      if (batch.length === 0) return { entries: 0, error: null, taken: queue.taken, remaining: queue.size };
      recent.prune(performance.now() + clockShift.ms);
      let error: string | null = null;
      try {
        await runTool(tool.argv, tool.render(batch));
        c.writes.value++;
        if (failing) log.info({ entries: batch.length }, `${type}: writing works again`);
        failing = false;
      } catch (err) {
        error = (err as Error).message;
        c.errors.value++;
        // Not written: an answer that brings them again queues them again.
        for (const e of batch) recent.forget(e.key);
        // Once per failing spell at warn; the metric and the actor's last_error keep count.
        if (failing) log.debug({ entries: batch.length, err: error }, `${type}: write failed`);
        else log.warn({ entries: batch.length, err: error }, `${type}: write failed; the batch is dropped (later failures are logged at debug until a write works)`);
        failing = true;
      } finally {
        settled += batch.length;
        if (waiter !== null && settled >= waiter.upTo) waiter.resolve();
      }
      return { entries: batch.length, error, taken: queue.taken, remaining: queue.size };
    },
    /**
     * What is still queued is written before the plugin goes (a reload, a shutdown): its actor lives
     * until this returns. Asked through the queue, so a quick setup's instance does it too.
     */
    async destroy() {
      const upTo = queue.accepted;
      if (settled >= upTo) return;
      const done = new Promise<boolean>((resolve) => (waiter = { upTo, resolve: () => resolve(true) }));
      // No actor listening (the plugin never became ready): nothing can write it.
      if (!queue.tell({ type: "SETS.FLUSH", upTo, requestId: `destroy:${ctx.tag}` })) return;
      // Each batch ends within the tool's deadline; past them all, the plugin goes anyway.
      const batches = Math.ceil((upTo - settled) / settings.batchSize) + 1;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), batches * TOOL_TIMEOUT_MS)));
      if (!(await Promise.race([done, late]))) log.warn({ entries: upTo - settled }, `${type}: gone before the queued prefixes were written`);
      clearTimeout(timer);
    },
  };
}
