// A small HTTP file server on 127.0.0.1 for download and cron tests:
//   /files/<name>     the file's current content (set with `set`), 404 when absent
//   /slow/<name>      the same content, dripped out over `slowMs` (headers at once)
//   /fail/<name>      always 500
//   /gate/<name>      held until the test calls `release(name, status)`: then the file (200) or that status
//   /redirect/<name>  302 to /files/<name>
//   /to-file/<name>   302 to file:///etc/<name> (a redirect away from http)
//   /short/<name>     declares the whole length, sends half, then closes the connection
//   /dyn/<name>       behaves as the mode set with `mode(name, …)`: ok (the file), fail, slow or short
//   /goto/<name>      302 to the location set with `redirect(name, location)` (anywhere: another host, the API)
// Every request is counted by path.

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface FileServer {
  port: number;
  /** http://127.0.0.1:<port> */
  url: string;
  set(name: string, content: string | Buffer): void;
  remove(name: string): void;
  /** Requests received per path, e.g. hits("/files/a.txt"). */
  hits(path: string): number;
  /** Requests held at /gate/<name> now. */
  held(name: string): number;
  /** Answers the oldest held request for /gate/<name>: the file with 200, or an empty body with `status`. */
  release(name: string, status?: number): void;
  /** Waits until at least `n` requests are held at /gate/<name>. */
  waitHeld(name: string, n?: number, timeoutMs?: number): Promise<void>;
  /** How /dyn/<name> answers from now on. */
  mode(name: string, mode: "ok" | "fail" | "slow" | "short"): void;
  /** Where /goto/<name> redirects from now on. */
  redirect(name: string, location: string): void;
  slowMs: number;
  close(): Promise<void>;
}

export async function startFileServer(): Promise<FileServer> {
  const files = new Map<string, Buffer>();
  const counts = new Map<string, number>();
  const gates = new Map<string, ServerResponse[]>();
  const modes = new Map<string, "ok" | "fail" | "slow" | "short">();
  const redirects = new Map<string, string>();
  const sockets = new Set<Socket>();
  const state = { slowMs: 2000 };

  const send = (res: ServerResponse, name: string): void => {
    const body = files.get(name);
    if (!body) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": "text/plain", "content-length": body.length }).end(body);
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const path = decodeURIComponent((req.url ?? "/").split("?")[0] ?? "/");
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const [, first, ...rest] = path.split("/");
    const name = rest.join("/");
    const kind = first === "dyn" ? { ok: "files", fail: "fail", slow: "slow", short: "short" }[modes.get(name) ?? "ok"] : first;
    switch (kind) {
      case "files":
        return send(res, name);
      case "fail":
        res.writeHead(500).end("broken on purpose");
        return;
      case "redirect":
        res.writeHead(302, { location: `/files/${name}` }).end();
        return;
      case "goto": {
        const location = redirects.get(name);
        if (location === undefined) res.writeHead(404).end();
        else res.writeHead(302, { location }).end();
        return;
      }
      case "to-file":
        res.writeHead(302, { location: `file:///etc/${name}` }).end();
        return;
      case "gate": {
        const list = gates.get(name) ?? [];
        list.push(res);
        gates.set(name, list);
        // A client that gives up (a cancelled download) is no longer held.
        res.on("close", () => {
          const now = gates.get(name) ?? [];
          if (now.includes(res)) gates.set(name, now.filter((r) => r !== res));
        });
        return;
      }
      case "short": {
        const body = files.get(name) ?? Buffer.from("0123456789");
        res.writeHead(200, { "content-length": body.length });
        res.write(body.subarray(0, Math.floor(body.length / 2)));
        setTimeout(() => res.socket?.destroy(), 50);
        return;
      }
      case "slow": {
        const body = files.get(name);
        if (!body) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { "content-length": body.length });
        const steps = 10;
        let sent = 0;
        const timer = setInterval(() => {
          const next = Math.ceil((body.length * (sent + 1)) / steps);
          res.write(body.subarray(Math.ceil((body.length * sent) / steps), next));
          sent++;
          if (sent >= steps) {
            clearInterval(timer);
            res.end();
          }
        }, state.slowMs / steps);
        res.on("close", () => clearInterval(timer));
        return;
      }
      default:
        res.writeHead(404).end();
    }
  };

  const server = createServer(handle);
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    set: (name, content) => files.set(name, Buffer.isBuffer(content) ? content : Buffer.from(content)),
    remove: (name) => files.delete(name),
    mode: (name, mode) => modes.set(name, mode),
    redirect: (name, location) => redirects.set(name, location),
    hits: (path) => counts.get(path) ?? 0,
    held: (name) => (gates.get(name) ?? []).length,
    release(name, status = 200) {
      const list = gates.get(name) ?? [];
      const res = list.shift();
      gates.set(name, list);
      if (!res) throw new Error(`no request held at /gate/${name}`);
      if (status === 200) send(res, name);
      else res.writeHead(status).end();
    },
    async waitHeld(name, n = 1, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while ((gates.get(name) ?? []).length < n) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} request(s) held at /gate/${name}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    get slowMs() {
      return state.slowMs;
    },
    set slowMs(ms: number) {
      state.slowMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
