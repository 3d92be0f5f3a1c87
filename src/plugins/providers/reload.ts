// Provider snapshots: built once at start, rebuilt and swapped by a reload. The new snapshot
// replaces the old one only when the rebuild succeeds, so queries always see a complete set. One
// reload at a time is the provider actor's rule (machines/provider.machine.ts), not this file's.

import type { Logger } from "../../observability/logger.js";

/** What a provider serves from: built once at start, rebuilt and swapped by reload. */
export class Snapshot<T extends { size: number }> {
  private constructor(
    /** Read by the data plane; replaced by one reference assignment. */
    public current: T,
    private readonly build: () => Promise<T>,
    private readonly log: Logger,
    private readonly kind: string,
  ) {}

  static async load<T extends { size: number }>(kind: string, log: Logger, build: () => Promise<T>): Promise<Snapshot<T>> {
    const started = performance.now();
    const first = await build();
    log.info({ rules: first.size, ms: Math.round(performance.now() - started) }, `${kind} loaded`);
    return new Snapshot(first, build, log, kind);
  }

  /** Rules in the snapshot serving now. */
  get rules(): number {
    return this.current.size;
  }

  /** Rebuilds from the startup args; a failure keeps the current snapshot and rejects. */
  async reload(): Promise<{ rules: number }> {
    const started = performance.now();
    try {
      this.current = await this.build();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, `${this.kind} reload failed; keeping the previous rules`);
      throw err;
    }
    this.log.info({ rules: this.current.size, ms: Math.round(performance.now() - started) }, `${this.kind} reloaded`);
    return { rules: this.current.size };
  }
}
