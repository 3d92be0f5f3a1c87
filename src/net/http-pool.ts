// A lean HTTP/1.1 client for one plain-http origin, the hot case of `http_request` (a webhook to a
// service on the LAN or this host): at most `maxSockets` kept-alive connections, one request at a
// time on each, the request written in one go and the answer parsed only as far as framing needs
// (status, Content-Length or chunked, Connection, Location). Its body is discarded. Node's http client
// costs ~4× the CPU per request; at thousands of webhooks a second that is CPU the DNS thread needs.
// https and SOCKS5 go through Node's client (src/net/http-send.ts), as do redirects.

import net from "node:net";
import { isOwnListener } from "./outbound-policy.js";

/** What a request needs of its answer. */
export interface Answer {
  status: number;
  statusText: string;
  location: string | null;
  /** The address the request went to (the pool's connections). */
  remote?: string;
}

/** How the caller cancels a request in flight (deadline, plugin going away). */
export interface Cancel {
  cancel: ((why: Error) => void) | null;
}

/** Answers longer than this are not read: the connection is closed instead. */
const DRAIN_CAP = 64 * 1024;
const MAX_HEAD = 16 * 1024;
/** A connection idle this long is not reused (servers commonly close idle ones after 5 s). */
const IDLE_MS = 4000;

type Phase = "head" | "length" | "chunk-size" | "chunk-data" | "trailers" | "close";

class Conn {
  private buf: Buffer = Buffer.alloc(0);
  private phase: Phase = "head";
  private remaining = 0;
  private keepAlive = true;
  private answer: Answer | null = null;
  private noBody = false;
  idleSince = 0;
  private pending: { resolve: (a: Answer) => void; reject: (e: Error) => void } | null = null;
  dead = false;

  constructor(
    readonly socket: net.Socket,
    private readonly done: (c: Conn, reusable: boolean) => void,
  ) {
    socket.setNoDelay(true);
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("error", (e) => this.fail(e));
    socket.on("close", () => {
      if (this.pending !== null && this.phase === "close" && this.answer !== null) this.finish(false);
      else this.fail(new Error("the connection closed before the answer was complete"));
    });
  }

  send(data: Buffer, head: boolean): Promise<Answer> {
    this.phase = "head";
    this.answer = null;
    this.noBody = head;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(data);
    });
  }

  destroy(why: Error): void {
    this.fail(why);
  }

  /** Ends the connection (once): the pool forgets it, and a request in flight fails with `e`. */
  private fail(e: Error): void {
    if (this.dead) return;
    this.dead = true;
    this.socket.destroy();
    const p = this.pending;
    this.pending = null;
    this.done(this, false);
    p?.reject(e);
  }

  private finish(keepAlive: boolean): void {
    // Bytes after the answer were never asked for: such a connection is not trusted with another request.
    const reusable = keepAlive && this.buf.length === 0;
    const p = this.pending;
    const a = this.answer as Answer;
    this.pending = null;
    if (!reusable) {
      this.dead = true;
      this.socket.destroy();
    }
    this.done(this, reusable);
    p?.resolve(a);
  }

  private onData(d: Buffer): void {
    if (this.pending === null) {
      // Bytes nobody asked for: the connection cannot be trusted any more.
      this.fail(new Error("unexpected data from the server"));
      return;
    }
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    try {
      this.parse();
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private parse(): void {
    for (;;) {
      const b = this.buf;
      switch (this.phase) {
        case "head": {
          const end = b.indexOf("\r\n\r\n");
          if (end < 0) {
            if (b.length > MAX_HEAD) throw new Error("the answer's head is too long");
            return;
          }
          this.head(b.toString("latin1", 0, end));
          this.buf = b.subarray(end + 4);
          if (this.answer === null) continue; // an interim 1xx answer
          if (this.phase === "head") return this.finish(this.keepAlive); // no body
          break;
        }
        case "length": {
          const n = Math.min(this.remaining, b.length);
          this.remaining -= n;
          this.buf = b.subarray(n);
          if (this.remaining > 0) return;
          return this.finish(this.keepAlive);
        }
        case "chunk-size": {
          const eol = b.indexOf("\r\n");
          if (eol < 0) {
            if (b.length > 1024) throw new Error("a chunk size line is too long");
            return;
          }
          const size = parseInt(b.toString("latin1", 0, eol).split(";")[0].trim(), 16);
          if (!Number.isFinite(size) || size < 0) throw new Error("a chunk size is not a number");
          this.buf = b.subarray(eol + 2);
          this.remaining += size;
          if (this.remaining > DRAIN_CAP) return this.finish(false);
          if (size === 0) this.phase = "trailers";
          else {
            this.remaining = size + 2; // its data and CRLF
            this.phase = "chunk-data";
          }
          break;
        }
        case "chunk-data": {
          const n = Math.min(this.remaining, b.length);
          this.remaining -= n;
          this.buf = b.subarray(n);
          if (this.remaining > 0) return;
          this.phase = "chunk-size";
          break;
        }
        case "trailers": {
          const eol = b.indexOf("\r\n");
          if (eol < 0) return;
          this.buf = b.subarray(eol + 2);
          if (eol === 0) return this.finish(this.keepAlive);
          break;
        }
        case "close":
          // Read until the server closes; past the cap, stop reading.
          if (b.length > DRAIN_CAP) return this.finish(false);
          return;
      }
    }
  }

  private head(text: string): void {
    const lines = text.split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]);
    if (!m) throw new Error(`not an HTTP/1.x answer: ${JSON.stringify(lines[0].slice(0, 64))}`);
    const status = Number(m[2]);
    if (status >= 100 && status < 200) {
      this.answer = null;
      return;
    }
    let length: number | null = null;
    let chunked = false;
    let connection = "";
    let location: string | null = null;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "content-length") length = Number(value);
      else if (name === "transfer-encoding") chunked = /\bchunked\b/i.test(value);
      else if (name === "connection") connection = value.toLowerCase();
      else if (name === "location") location = value;
    }
    this.keepAlive = m[1] === "1" ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    this.answer = { status, statusText: m[3] ?? "", location };
    this.remaining = 0;
    if (this.noBody || status === 204 || status === 304) this.phase = "head";
    else if (chunked) this.phase = "chunk-size";
    else if (length !== null) {
      if (!Number.isInteger(length) || length < 0) throw new Error("the answer's Content-Length is not a number");
      if (length > DRAIN_CAP) {
        this.keepAlive = false;
        this.phase = "head";
      } else if (length === 0) this.phase = "head";
      else {
        this.remaining = length;
        this.phase = "length";
      }
    } else {
      this.keepAlive = false;
      this.phase = "close";
    }
  }
}

export class HttpPool {
  private readonly idle: Conn[] = [];
  /** Connections with a request in flight. */
  private readonly busy = new Set<Conn>();
  private open = 0;
  private readonly waiters: ((c: Conn | Error) => void)[] = [];
  private closed = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly maxSockets: number,
    /** How connections resolve the host and where they start from (the egress profile's resolver and bind). */
    private readonly route: { lookup?: net.LookupFunction; localAddress?: string } = {},
  ) {}

  /** Sends `data` (head and body) and resolves with the answer's status once it is read (its body discarded). */
  async request(data: Buffer, isHead: boolean, cancel: Cancel): Promise<Answer> {
    const conn = await this.take(cancel);
    const remote = conn.socket.remoteAddress;
    // The API may have started listening on this address since the connection was made.
    if (remote !== undefined && isOwnListener(remote, this.port)) {
      conn.destroy(new Error("refused"));
      throw new PoolRefusal(`${remote}:${this.port} is this program's own management API; outbound requests never go there`);
    }
    cancel.cancel = (why) => conn.destroy(why);
    this.busy.add(conn);
    try {
      const a = await conn.send(data, isHead);
      a.remote = remote;
      return a;
    } finally {
      this.busy.delete(conn);
      cancel.cancel = null;
    }
  }

  private take(cancel: Cancel): Promise<Conn> {
    const now = performance.now();
    while (this.idle.length > 0) {
      const c = this.idle.pop() as Conn;
      if (!c.dead && now - c.idleSince < IDLE_MS) return Promise.resolve(c);
      c.destroy(new Error("idle"));
    }
    if (this.open < this.maxSockets) return this.connect();
    return new Promise((resolve, reject) => {
      const waiter = (c: Conn | Error): void => (c instanceof Error ? reject(c) : resolve(c));
      this.waiters.push(waiter);
      cancel.cancel = (why) => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(why);
      };
    });
  }

  private connect(): Promise<Conn> {
    this.open++;
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.host, port: this.port, ...this.route });
      const onError = (e: Error): void => {
        this.open--;
        this.wakeWaiter();
        reject(e);
      };
      socket.once("error", onError);
      socket.once("connect", () => {
        socket.off("error", onError);
        resolve(new Conn(socket, (c, reusable) => this.release(c, reusable)));
      });
    });
  }

  private release(c: Conn, reusable: boolean): void {
    if (!reusable || this.closed) {
      if (!c.dead) {
        c.destroy(new Error("closed")); // reports again, as dead
        return;
      }
      this.open--;
      this.wakeWaiter();
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) waiter(c);
    else {
      c.idleSince = performance.now();
      this.idle.push(c);
    }
  }

  /** A connection was given up: a waiter may open a new one. */
  private wakeWaiter(): void {
    const waiter = this.waiters.shift();
    if (!waiter) return;
    this.connect().then(waiter, (e: Error) => waiter(e));
  }

  /** Closes every connection; requests in flight fail ("the client is closed"). */
  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) c.destroy(new Error("closed"));
    for (const c of [...this.busy]) c.destroy(new Error("the client is closed"));
    for (const w of this.waiters.splice(0)) w(new Error("the client is closed"));
  }
}

/** The outbound rules refused the connection. */
export class PoolRefusal extends Error {}
