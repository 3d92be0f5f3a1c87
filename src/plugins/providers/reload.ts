// Provider reload plumbing: one rebuild at a time; the new snapshot replaces the old one only
// when the rebuild succeeds, so queries always see a complete set.

import type { Logger } from "../../observability/logger.js";

/** A reload was asked for while the provider is still rebuilding (the API maps it to 409). */
export class ProviderBusyError extends Error {
  constructor(readonly tag: string) {
    super(`provider '${tag}' is already reloading`);
    this.name = "ProviderBusyError";
  }
}

export class ReloadGate {
  private running = false;

  constructor(private readonly tag: string) {}

  get busy(): boolean {
    return this.running;
  }

  /** Runs `rebuild` unless one is running (then rejects with ProviderBusyError). */
  async run(rebuild: () => Promise<void>): Promise<void> {
    if (this.running) throw new ProviderBusyError(this.tag);
    this.running = true;
    try {
      await rebuild();
    } finally {
      this.running = false;
    }
  }
}

/** What a provider serves from: built once at start, rebuilt and swapped by reload. */
export class Snapshot<T extends { size: number }> {
  private readonly gate: ReloadGate;

  private constructor(
    /** Read by the data plane; replaced by one reference assignment. */
    public current: T,
    private readonly build: () => Promise<T>,
    private readonly log: Logger,
    private readonly kind: string,
    tag: string,
  ) {
    this.gate = new ReloadGate(tag);
  }

  static async load<T extends { size: number }>(kind: string, tag: string, log: Logger, build: () => Promise<T>): Promise<Snapshot<T>> {
    const started = performance.now();
    const first = await build();
    log.info({ rules: first.size, ms: Math.round(performance.now() - started) }, `${kind} loaded`);
    return new Snapshot(first, build, log, kind, tag);
  }

  /** Rebuilds from the startup args; a failure keeps the current snapshot and rejects. */
  reload(): Promise<void> {
    return this.gate.run(async () => {
      const started = performance.now();
      try {
        this.current = await this.build();
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, `${this.kind} reload failed; keeping the previous rules`);
        throw err;
      }
      this.log.info({ rules: this.current.size, ms: Math.round(performance.now() - started) }, `${this.kind} reloaded`);
    });
  }
}
