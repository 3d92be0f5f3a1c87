// Probes one address the way a client would reach it: a TCP connect to each configured port in turn,
// the next one starting `probe_stagger` after the last (or at once when the last failed), each given
// `probe_timeout`; the first to connect wins and its connect time is the score. Connections are closed
// as soon as they open. Probes of the whole plugin are bounded (`max_parallel_probes`: a probe that
// would exceed it is not started and is counted), and an address already being probed is not probed
// twice: later queries wait on the same probe.

import net from "node:net";
import type { Outbound } from "../../../net/outbound.js";
import { socks5Connect } from "../../../net/socks5.js";
import type { Cell, Observer } from "../../../observability/metrics.js";
import type { ProbeMethod, SelectorOptions } from "./options.js";
import type { Score } from "./scores.js";

/** A probe's end: a score, or `skipped` when no method could be tried (limit reached, nothing runnable). */
export type ProbeOutcome = Score | { ok: false; skipped: true };

export interface ProbeMetrics {
  /** Per method label: outcome cells and the connect-time histogram. */
  method(label: string): { success: Cell; failure: Cell; timeout: Cell; unavailable: Cell; seconds: Observer };
  droppedLimit: Cell;
  droppedInflight: Cell;
}

type Attempt = "success" | "failure" | "timeout";

export class Prober {
  private readonly inflight = new Map<string, Promise<ProbeOutcome>>();
  private readonly sockets = new Set<net.Socket>();
  private active = 0;
  private closed = false;

  constructor(
    private readonly opts: Pick<SelectorOptions, "methods" | "socks5" | "staggerMs" | "timeoutMs" | "maxParallel">,
    private readonly metrics: ProbeMetrics,
    /** Told each probe's outcome once, before anyone waiting on it. */
    private readonly remember: (address: string, outcome: ProbeOutcome) => void,
    /** The `outbound` profile when it has a proxy or a bind address (a local `socks5` still wins). */
    private readonly via: Outbound | null = null,
  ) {}

  /** The probe of `address` (started now, or the one already running). Never rejects. */
  probe(address: string): Promise<ProbeOutcome> {
    const running = this.inflight.get(address);
    if (running !== undefined) {
      this.metrics.droppedInflight.value++;
      return running;
    }
    const p = this.run(address).then((outcome) => {
      this.inflight.delete(address);
      this.remember(address, outcome);
      return outcome;
    });
    this.inflight.set(address, p);
    return p;
  }

  private run(address: string): Promise<ProbeOutcome> {
    const methods = this.opts.methods;
    return new Promise<ProbeOutcome>((resolve) => {
      let next = 0;
      let running = 0;
      let tried = false;
      let done = false;
      let stagger: NodeJS.Timeout | null = null;
      const finish = (outcome: ProbeOutcome): void => {
        done = true;
        if (stagger !== null) clearTimeout(stagger);
        resolve(outcome);
      };
      const settleIfOver = (): void => {
        if (!done && running === 0 && next >= methods.length) finish(tried ? { ok: false } : { ok: false, skipped: true });
      };
      const launch = (): void => {
        if (stagger !== null) clearTimeout(stagger);
        stagger = null;
        // Methods that cannot run (ping) or cannot start (limit) give way to the next one at once.
        while (!done && next < methods.length) {
          const m = methods[next++];
          if (this.start(m, address, (attempt, ms) => onEnd(attempt, ms))) {
            running++;
            tried = true;
            if (next < methods.length) stagger = setTimeout(launch, this.opts.staggerMs);
            return;
          }
        }
        settleIfOver();
      };
      const onEnd = (attempt: Attempt, ms: number): void => {
        running--;
        if (done) return;
        if (attempt === "success") return finish({ ok: true, ms });
        if (next < methods.length) launch();
        else settleIfOver();
      };
      launch();
    });
  }

  /** Starts one method's attempt; false when it cannot run now (counted). */
  private start(m: ProbeMethod, address: string, onEnd: (attempt: Attempt, ms: number) => void): boolean {
    const cells = this.metrics.method(m.label);
    if (m.kind === "unavailable") {
      cells.unavailable.value++;
      return false;
    }
    if (this.closed) return false;
    if (this.active >= this.opts.maxParallel) {
      this.metrics.droppedLimit.value++;
      return false;
    }
    this.active++;
    const started = performance.now();
    void this.connect(address, m.port).then((attempt) => {
      this.active--;
      const ms = performance.now() - started;
      cells[attempt].value++;
      if (attempt === "success") cells.seconds.observe(ms / 1000);
      onEnd(attempt, ms);
    });
    return true;
  }

  private connect(address: string, port: number): Promise<Attempt> {
    const timeoutMs = this.opts.timeoutMs;
    if (this.opts.socks5 !== null) return this.viaSocks(this.opts.socks5, address, port, timeoutMs);
    if (this.via !== null) return this.viaProfile(this.via, address, port, timeoutMs);
    return new Promise<Attempt>((resolve) => {
      const socket = net.connect({ host: address, port, family: address.includes(":") ? 6 : 4 });
      this.sockets.add(socket);
      socket.unref();
      const end = (attempt: Attempt): void => {
        clearTimeout(timer);
        this.sockets.delete(socket);
        socket.destroy();
        resolve(attempt);
      };
      const timer = setTimeout(() => end("timeout"), timeoutMs);
      socket.once("connect", () => end("success"));
      socket.once("error", () => end("failure"));
      // Destroyed by close() (the plugin going away).
      socket.once("close", () => end("failure"));
    });
  }

  private viaSocks(proxy: string, address: string, port: number, timeoutMs: number): Promise<Attempt> {
    return this.attempt(timeoutMs, socks5Connect(proxy, address, port, { timeoutMs }));
  }

  private viaProfile(via: Outbound, address: string, port: number, timeoutMs: number): Promise<Attempt> {
    return this.attempt(timeoutMs, via.connect(address, port, { timeoutMs }));
  }

  /** A connection attempt made elsewhere, judged within `timeoutMs` (the socket is closed once open). */
  private attempt(timeoutMs: number, connecting: Promise<net.Socket>): Promise<Attempt> {
    return new Promise<Attempt>((resolve) => {
      let over = false;
      const timer = setTimeout(() => {
        over = true;
        resolve("timeout");
      }, timeoutMs);
      connecting.then(
        (socket) => {
          socket.destroy();
          clearTimeout(timer);
          if (!over) resolve("success");
        },
        () => {
          clearTimeout(timer);
          if (!over) resolve("failure");
        },
      );
    });
  }

  /** Ends every probe: open connection attempts are destroyed; nothing new starts. */
  close(): void {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
}
