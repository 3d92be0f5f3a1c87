// A RouterOS-shaped REST server on 127.0.0.1 (no RouterOS runs in the tests): the address-list menus
// of RouterOS v7's REST API over HTTPS (or HTTP), in memory.
//   GET    /rest/ip/firewall/address-list[?prop=value...]   rows whose properties equal every given one
//   PUT    /rest/ip/firewall/address-list                   add {list, address, timeout?, comment?} → the row
//   PATCH  /rest/ip/firewall/address-list/<.id>             change timeout/comment/disabled → the row
//   DELETE /rest/ip/firewall/address-list/<.id>             remove (204)
// and the same under /rest/ipv6/firewall/address-list. As RouterOS does: Basic auth (401 otherwise),
// every value a string, a row with a timeout is dynamic and shows the time it has left, and errors are
// JSON {error, message, detail} (400 "failure: already have such entry" for a duplicate, 404 for an
// unknown .id). Rows expire on the server's clock, which the test moves with `advance`.
// For the tests: `failNext` makes the next calls fail, `hold` keeps calls waiting until `release`.

import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";

export interface FakeRow {
  ".id": string;
  list: string;
  address: string;
  /** Seconds set (null: no timeout). */
  timeoutSet: number | null;
  /** Server clock (ms) when it ends. */
  expiresAt: number | null;
  comment: string;
  family: 4 | 6;
  disabled: boolean;
}

export interface SeenCall {
  method: string;
  path: string;
  body: Record<string, unknown> | null;
  status: number;
}

export interface FakeRouter {
  port: number;
  /** https://127.0.0.1:<port> (or http://). */
  url: string;
  calls: SeenCall[];
  rows(family?: 4 | 6): FakeRow[];
  /** Adds a row as an operator (or an earlier program) would have. */
  seed(row: { family?: 4 | 6; list: string; address: string; comment?: string; timeout?: number }): FakeRow;
  /** Removes a row as an operator would. */
  remove(id: string): void;
  /** The next `n` calls (of `method`, if given) answer `status` (a 503 by default) instead of doing anything. */
  failNext(n: number, status?: number, method?: string): void;
  /** Calls from now on wait until released. */
  hold(): void;
  /** Calls waiting now. */
  held(): number;
  /** Stops holding and lets every waiting call through. */
  release(): void;
  waitHeld(n?: number, timeoutMs?: number): Promise<void>;
  /** Moves the server's clock (rows expire by it). */
  advance(ms: number): void;
  close(): Promise<void>;
}

export interface FakeRouterOptions {
  username?: string;
  password?: string;
  /** HTTPS with this certificate; plain HTTP without. */
  tls?: { cert: Buffer; key: Buffer };
}

const MENUS: Record<string, 4 | 6> = { "/rest/ip/firewall/address-list": 4, "/rest/ipv6/firewall/address-list": 6 };

function duration(seconds: number): string {
  let s = Math.max(0, Math.ceil(seconds));
  const parts: string[] = [];
  for (const [unit, size] of [["w", 604_800], ["d", 86_400], ["h", 3600], ["m", 60], ["s", 1]] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.join("") || "0s";
}

/** RouterOS accepts `1h2m3s`, `00:05:00` or plain seconds. */
function readTimeout(v: unknown): number | null | "bad" {
  if (v === undefined) return null;
  if (typeof v !== "string" && typeof v !== "number") return "bad";
  const text = String(v);
  if (/^\d+$/.test(text)) return Number(text);
  const clock = /^(\d+):(\d{2}):(\d{2})$/.exec(text);
  if (clock) return Number(clock[1]) * 3600 + Number(clock[2]) * 60 + Number(clock[3]);
  const m = /^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text);
  if (!m || text === "") return "bad";
  return Number(m[1] ?? 0) * 604_800 + Number(m[2] ?? 0) * 86_400 + Number(m[3] ?? 0) * 3600 + Number(m[4] ?? 0) * 60 + Number(m[5] ?? 0);
}

export async function startFakeRouter(opts: FakeRouterOptions = {}): Promise<FakeRouter> {
  const user = opts.username ?? "api-user";
  const pass = opts.password ?? "secret";
  const rows = new Map<string, FakeRow>();
  const calls: SeenCall[] = [];
  let nextId = 1;
  let shift = 0;
  let failures: { n: number; status: number; method?: string } = { n: 0, status: 503 };
  let holding = false;
  const waiting: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const now = (): number => Date.now() + shift;

  const live = (): FakeRow[] => {
    for (const [id, r] of rows) if (r.expiresAt !== null && r.expiresAt <= now()) rows.delete(id);
    return [...rows.values()];
  };
  const shown = (r: FakeRow): Record<string, string> => ({
    ".id": r[".id"],
    list: r.list,
    address: r.address,
    "creation-time": "2026-01-01 00:00:00",
    ...(r.expiresAt === null ? {} : { timeout: duration((r.expiresAt - now()) / 1000) }),
    dynamic: String(r.expiresAt !== null),
    disabled: String(r.disabled),
    ...(r.comment === "" ? {} : { comment: r.comment }),
  });
  const add = (family: 4 | 6, list: string, address: string, comment: string, timeout: number | null): FakeRow => {
    const row: FakeRow = { ".id": `*${(nextId++).toString(16).toUpperCase()}`, list, address, comment, family, disabled: false, timeoutSet: timeout, expiresAt: timeout === null || timeout === 0 ? null : now() + timeout * 1000 };
    rows.set(row[".id"], row);
    return row;
  };

  const handle = (req: IncomingMessage, res: ServerResponse, text: string): void => {
    const url = new URL(req.url ?? "/", "http://x");
    const method = req.method ?? "GET";
    let body: Record<string, unknown> | null = null;
    const answer = (status: number, value?: unknown): void => {
      calls.push({ method, path: url.pathname + url.search, body, status });
      if (value === undefined) {
        res.writeHead(status).end();
        return;
      }
      const out = JSON.stringify(value);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(out) }).end(out);
    };
    const fail = (status: number, message: string, detail?: string): void => answer(status, { error: status, message, ...(detail === undefined ? {} : { detail }) });
    if (text !== "") {
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        return fail(400, "Bad Request", "JSON parsing error");
      }
    }
    if (req.headers.authorization !== `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`) return fail(401, "Unauthorized");
    if (failures.n > 0 && (failures.method === undefined || failures.method === method)) {
      failures.n--;
      return fail(failures.status, failures.status >= 500 ? "Internal Server Error" : "Bad Request", "injected failure");
    }
    const slash = url.pathname.lastIndexOf("/");
    const menuFamily = MENUS[url.pathname];
    const itemFamily = MENUS[url.pathname.slice(0, slash)];
    if (menuFamily !== undefined && method === "GET") {
      const filters = [...url.searchParams.entries()];
      return answer(200, live().filter((r) => r.family === menuFamily).map(shown).filter((r) => filters.every(([k, v]) => r[k] === v)));
    }
    if (menuFamily !== undefined && method === "PUT") {
      const list = body?.list;
      const address = body?.address;
      if (typeof list !== "string" || typeof address !== "string") return fail(400, "Bad Request", "failure: list and address must be set");
      const timeout = readTimeout(body?.timeout);
      if (timeout === "bad") return fail(400, "Bad Request", `value of timeout is not a time interval`);
      if (live().some((r) => r.family === menuFamily && r.list === list && r.address === address)) return fail(400, "Bad Request", "failure: already have such entry");
      return answer(201, shown(add(menuFamily, list, address, typeof body?.comment === "string" ? body.comment : "", timeout)));
    }
    if (itemFamily !== undefined && (method === "PATCH" || method === "DELETE")) {
      live();
      const row = rows.get(decodeURIComponent(url.pathname.slice(slash + 1)));
      if (row === undefined || row.family !== itemFamily) return fail(404, "Not Found");
      if (method === "DELETE") {
        rows.delete(row[".id"]);
        return answer(204);
      }
      if (body?.timeout !== undefined) {
        const timeout = readTimeout(body.timeout);
        if (timeout === "bad") return fail(400, "Bad Request", "value of timeout is not a time interval");
        row.timeoutSet = timeout;
        row.expiresAt = timeout === null || timeout === 0 ? null : now() + timeout * 1000;
      }
      if (typeof body?.comment === "string") row.comment = body.comment;
      return answer(200, shown(row));
    }
    fail(400, "Bad Request", "no such command");
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const go = (): void => {
        if (!res.destroyed) handle(req, res, Buffer.concat(chunks).toString("utf8"));
      };
      if (holding) waiting.push(go);
      else go();
    });
  };
  const server = opts.tls ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }, onRequest) : createHttpServer(onRequest);
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("secureConnection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`,
    calls,
    rows: (family) => live().filter((r) => family === undefined || r.family === family),
    seed: (r) => add(r.family ?? 4, r.list, r.address, r.comment ?? "", r.timeout ?? null),
    remove: (id) => {
      rows.delete(id);
    },
    failNext(n, status = 503, method) {
      failures = { n, status, method };
    },
    hold() {
      holding = true;
    },
    held: () => waiting.length,
    release() {
      holding = false;
      for (const go of waiting.splice(0)) go();
    },
    async waitHeld(n = 1, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (waiting.length < n) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} held calls (${waiting.length} held)`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    advance(ms) {
      shift += ms;
    },
    async close() {
      holding = false;
      for (const go of waiting.splice(0)) go();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
