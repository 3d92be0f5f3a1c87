// A stream that stands for a TCP connection still being made (through a SOCKS5 proxy): callers
// that need a socket at once (a connection pool, tls.connect, an HTTP/2 session) get this, write
// to it straight away, and the bytes go out once the real socket is there. It emits `connect`
// when it is, ends with it, and is ended with it: destroying it abandons the attempt.

import type net from "node:net";
import { Duplex } from "node:stream";

export class PendingSocket extends Duplex {
  private real: net.Socket | null = null;
  private readonly queued: { chunk: Buffer; done: (err?: Error | null) => void }[] = [];
  private finalPending: ((err?: Error | null) => void) | null = null;
  private referenced = true;
  private noDelay = false;
  private readonly attempt = new AbortController();

  /** `open` makes the connection; it is given a signal that aborts when this stream is destroyed first. */
  constructor(open: (signal: AbortSignal) => Promise<net.Socket>) {
    super({ allowHalfOpen: false });
    open(this.attempt.signal).then(
      (socket) => this.attach(socket),
      (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
    );
  }

  get connecting(): boolean {
    return this.real === null && !this.destroyed;
  }

  private attach(socket: net.Socket): void {
    if (this.destroyed) {
      socket.destroy();
      return;
    }
    this.real = socket;
    socket.setNoDelay(this.noDelay);
    if (!this.referenced) socket.unref();
    socket.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on("end", () => this.push(null));
    socket.on("error", (err) => this.destroy(err));
    socket.on("close", () => this.destroy());
    for (const q of this.queued.splice(0)) socket.write(q.chunk, q.done);
    if (this.finalPending) socket.end(this.finalPending);
    this.emit("connect");
  }

  override _read(): void {
    this.real?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.real) this.real.write(chunk, done);
    else this.queued.push({ chunk, done });
  }

  override _final(done: (err?: Error | null) => void): void {
    if (this.real) this.real.end(done);
    else this.finalPending = done;
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    this.attempt.abort();
    this.real?.destroy();
    done(err);
  }

  setNoDelay(noDelay = true): this {
    this.noDelay = noDelay;
    this.real?.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, delay?: number): this {
    this.real?.setKeepAlive(enable, delay);
    return this;
  }

  unref(): this {
    this.referenced = false;
    this.real?.unref();
    return this;
  }

  ref(): this {
    this.referenced = true;
    this.real?.ref();
    return this;
  }
}
