// A raw DNS-over-TCP (or over TLS) client for limit tests: frames what it is given, collects
// answers, and records when the server closed the connection.

import net from "node:net";
import tls from "node:tls";

export function framed(packet: Buffer): Buffer {
  const out = Buffer.allocUnsafe(packet.length + 2);
  out.writeUInt16BE(packet.length, 0);
  packet.copy(out, 2);
  return out;
}

export class RawTcp {
  readonly sock: net.Socket;
  readonly answers: Buffer[] = [];
  readonly connected: Promise<void>;
  /** Resolves with the time (Date.now()) the connection closed, whoever closed it. */
  readonly closed: Promise<number>;
  closedAt = 0;
  private pending: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  /** With `tlsOptions`, DNS over TLS: `connected` waits for the handshake. */
  constructor(port: number, host = "127.0.0.1", tlsOptions?: tls.ConnectionOptions) {
    this.sock = tlsOptions ? tls.connect({ ...tlsOptions, port, host }) : net.connect(port, host);
    this.sock.on("error", () => this.sock.destroy());
    this.connected = new Promise((resolve, reject) => {
      this.sock.once(tlsOptions ? "secureConnect" : "connect", () => resolve());
      this.sock.once("close", () => reject(new Error("closed before connecting")));
    });
    this.connected.catch(() => undefined);
    this.closed = new Promise((resolve) =>
      this.sock.once("close", () => {
        this.closedAt = Date.now();
        for (const w of this.waiters.splice(0)) w();
        resolve(this.closedAt);
      }),
    );
    this.sock.on("data", (d: Buffer) => {
      this.pending = this.pending.length === 0 ? d : Buffer.concat([this.pending, d]);
      while (this.pending.length >= 2 && this.pending.length >= this.pending.readUInt16BE(0) + 2) {
        const len = this.pending.readUInt16BE(0);
        this.answers.push(Buffer.from(this.pending.subarray(2, 2 + len)));
        this.pending = this.pending.subarray(2 + len);
      }
      for (const w of this.waiters.splice(0)) w();
    });
  }

  get isClosed(): boolean {
    return this.closedAt !== 0;
  }

  send(...packets: Buffer[]): void {
    this.sock.write(Buffer.concat(packets.map(framed)));
  }

  /** Resolves once `n` answers arrived; rejects when the connection closes first or after `timeoutMs`. */
  async waitAnswers(n: number, timeoutMs = 3000): Promise<Buffer[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.answers.length < n) {
      if (this.isClosed) throw new Error(`closed after ${this.answers.length} of ${n} answers`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.answers.length} of ${n} answers in ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.answers.slice(0, n);
  }

  /** True when the connection closed within `ms`. */
  async closesWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    const result = await Promise.race([this.closed.then(() => true), timeout]);
    clearTimeout(timer);
    return result;
  }

  /** shutdown(SHUT_WR): no more queries (over TLS a close_notify first); answers can still arrive. */
  halfClose(): void {
    this.sock.end();
  }

  destroy(): void {
    this.sock.destroy();
  }
}
