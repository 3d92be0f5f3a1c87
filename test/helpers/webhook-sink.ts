// An HTTP server on 127.0.0.1 port 0 that records every request it gets (method, URL, headers, body)
// for the http_request tests. By default it answers 200 at once; `status(path, n)` sets another answer
// for a path (3xx with `location`), and `hold(true)` keeps requests unanswered until `release()`.

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";

export interface SinkRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The client's port: requests over one kept-alive connection share it. */
  remotePort: number;
}

export interface WebhookSink {
  port: number;
  /** http://127.0.0.1:<port> (https:// with TLS) */
  url: string;
  requests: SinkRequest[];
  /** Answers requests for `path` (without the query string) with `status`, and `location` for a redirect. */
  status(path: string, status: number, location?: string): void;
  /** Holds every request from now on (true) or answers as usual (false; held ones stay held). */
  hold(on: boolean): void;
  /** Requests held now. */
  held(): number;
  /** Answers every held request (200 unless a status is set for its path). */
  release(): void;
  /** Waits until `n` requests have arrived (received, whether answered or held). */
  waitFor(n: number, timeoutMs?: number): Promise<SinkRequest[]>;
  close(): Promise<void>;
}

/** With `tls`, an https server presenting that certificate. */
export async function startWebhookSink(opts: { tls?: { cert: Buffer; key: Buffer } } = {}): Promise<WebhookSink> {
  const requests: SinkRequest[] = [];
  const statuses = new Map<string, { status: number; location?: string }>();
  const heldResponses: { res: ServerResponse; path: string }[] = [];
  const sockets = new Set<Socket>();
  const waiters: (() => void)[] = [];
  let holding = false;

  const answer = (res: ServerResponse, path: string): void => {
    const s = statuses.get(path);
    if (!s) res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    else res.writeHead(s.status, s.location ? { location: s.location } : {}).end(s.status >= 400 ? "failed on purpose" : "");
  };

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), remotePort: req.socket.remotePort ?? 0 });
      for (const w of waiters.splice(0)) w();
      if (holding) heldResponses.push({ res, path });
      else answer(res, path);
    });
  };
  const server = opts.tls ? createTlsServer(opts.tls, handler) : createServer(handler);
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  };
  if (opts.tls) server.on("secureConnection", track);
  else server.on("connection", track);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    status: (path, status, location) => statuses.set(path, { status, location }),
    hold: (on) => (holding = on),
    held: () => heldResponses.length,
    release: () => {
      for (const h of heldResponses.splice(0)) answer(h.res, h.path);
    },
    async waitFor(n, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`the sink got ${requests.length} of ${n} requests`);
        await Promise.race([new Promise<void>((r) => waiters.push(r)), new Promise((r) => setTimeout(r, left))]);
      }
      return requests.slice(0, n);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
