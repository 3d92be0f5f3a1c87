// A small client of RouterOS's REST API (v7: the www-ssl or www service, `<base>/rest/...`): HTTP
// Basic auth, JSON both ways, keep-alive connections (a few at a time), one deadline per call, an
// optional CA or no verification, and errors that say whether trying again may help.
//   GET    /ip/firewall/address-list?list=<name>   the list's rows
//   PUT    /ip/firewall/address-list               add a row ({list, address, timeout?, comment}): the row with its .id
//   PATCH  /ip/firewall/address-list/<.id>         change a row (its timeout)
//   DELETE /ip/firewall/address-list/<.id>         remove a row
// IPv6 lists live under /ipv6/firewall/address-list. A failure is a JSON body {error, message, detail}
// (e.g. 400 "failure: already have such entry").

import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";

/** Connections to the router at once (calls beyond wait for one). */
export const MAX_CONNECTIONS = 4;
/** Largest answer read (a list scan of ~100 000 rows). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

export interface RosClientOptions {
  base: URL;
  username: string;
  password: string;
  ca: Buffer | null;
  insecure: boolean;
  /** The name the router's certificate is checked against (default: the address's host). */
  serverName?: string;
  /** The whole call: connect, send, answer. */
  timeoutMs: number;
  connectTimeoutMs?: number;
  /** Longest silence while a call is sent or its answer read. */
  idleTimeoutMs?: number;
}

/** `conflict`: the router refused an add as a duplicate, then showed no such row (it changed meanwhile). */
export type RosFailure = "timeout" | "network" | "tls" | "status" | "answer" | "cancelled" | "conflict";

export class RosError extends Error {
  constructor(
    message: string,
    readonly kind: RosFailure,
    readonly status: number | null = null,
    /** RouterOS's own words (`detail`, else `message`) for a failed call. */
    readonly detail: string = "",
  ) {
    super(message);
    this.name = "RosError";
  }

  /** A call that may work if tried again later: no answer, a timeout, or a busy or failing router. */
  get transient(): boolean {
    if (this.kind === "timeout" || this.kind === "network" || this.kind === "conflict") return true;
    return this.kind === "status" && this.status !== null && (this.status >= 500 || this.status === 429 || this.status === 408);
  }

  /** RouterOS refused an add because the list already has that address. */
  get duplicate(): boolean {
    return this.kind === "status" && this.status === 400 && /already have such entry/i.test(this.detail);
  }

  /** The row addressed by .id is gone. */
  get missing(): boolean {
    return this.kind === "status" && (this.status === 404 || (this.status === 400 && /no such item/i.test(this.detail)));
  }
}

/** One address-list row as RouterOS prints it (every value a string). */
export interface RosRow {
  ".id": string;
  list?: string;
  address?: string;
  timeout?: string;
  comment?: string;
  dynamic?: string;
  disabled?: string;
}

const TLS_CODES = /^(CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL_)/;

/** `1w2d3h4m5s` (RouterOS's print form), 0 as `0s`. */
export function routerosDuration(seconds: number): string {
  let s = Math.max(0, Math.floor(seconds));
  if (s === 0) return "0s";
  const parts: string[] = [];
  for (const [unit, size] of [["w", 604_800], ["d", 86_400], ["h", 3600], ["m", 60], ["s", 1]] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.join("");
}

/** Seconds of a RouterOS duration (`1w2d3h4m5s`, `00:05:00`, `1d00:00:10`, `300`); null when it is none or unreadable. */
export function parseRouterosDuration(text: string | undefined): number | null {
  if (text === undefined || text === "" || /^none/i.test(text)) return null;
  const clock = /^(?:(\d+)w)?(?:(\d+)d)?(\d+):(\d{2}):(\d{2})(?:\.\d+)?$/.exec(text);
  if (clock) return Number(clock[1] ?? 0) * 604_800 + Number(clock[2] ?? 0) * 86_400 + Number(clock[3]) * 3600 + Number(clock[4]) * 60 + Number(clock[5]);
  if (/^\d+$/.test(text)) return Number(text);
  const m = /^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$/.exec(text);
  if (!m || text === "") return null;
  return Number(m[1] ?? 0) * 604_800 + Number(m[2] ?? 0) * 86_400 + Number(m[3] ?? 0) * 3600 + Number(m[4] ?? 0) * 60 + Number(m[5] ?? 0);
}

export class RosClient {
  private readonly agent: http.Agent;
  private readonly auth: string;
  private readonly secure: boolean;

  constructor(private readonly opts: RosClientOptions) {
    this.secure = opts.base.protocol === "https:";
    this.auth = `Basic ${Buffer.from(`${opts.username}:${opts.password}`).toString("base64")}`;
    const common = { keepAlive: true, maxSockets: MAX_CONNECTIONS, maxFreeSockets: MAX_CONNECTIONS };
    this.agent = this.secure
      ? new https.Agent({ ...common, ca: opts.ca ?? undefined, rejectUnauthorized: !opts.insecure, servername: opts.serverName })
      : new http.Agent(common);
  }

  /** The REST root, for messages. */
  get where(): string {
    return `${this.opts.base.origin}${this.opts.base.pathname}`;
  }

  private menu(family: 4 | 6): string {
    return family === 4 ? "/ip/firewall/address-list" : "/ipv6/firewall/address-list";
  }

  list(family: 4 | 6, list: string, signal?: AbortSignal): Promise<RosRow[]> {
    return this.call("GET", `${this.menu(family)}?list=${encodeURIComponent(list)}`, undefined, signal).then(rowsOf);
  }

  /** The rows of `list` holding `address` (RouterOS filters by equality of each given property). */
  find(family: 4 | 6, list: string, address: string, signal?: AbortSignal): Promise<RosRow[]> {
    return this.call("GET", `${this.menu(family)}?list=${encodeURIComponent(list)}&address=${encodeURIComponent(address)}`, undefined, signal).then(rowsOf);
  }

  async add(family: 4 | 6, row: { list: string; address: string; timeout?: string; comment: string }, signal?: AbortSignal): Promise<RosRow> {
    const [created] = rowsOf([await this.call("PUT", this.menu(family), row, signal)]);
    if (!created) throw new RosError(`${this.where}: the router's answer to an add has no .id`, "answer");
    return created;
  }

  async update(family: 4 | 6, id: string, change: { timeout: string }, signal?: AbortSignal): Promise<void> {
    await this.call("PATCH", `${this.menu(family)}/${encodeURIComponent(id)}`, change, signal);
  }

  async remove(family: 4 | 6, id: string, signal?: AbortSignal): Promise<void> {
    await this.call("DELETE", `${this.menu(family)}/${encodeURIComponent(id)}`, undefined, signal);
  }

  close(): void {
    this.agent.destroy();
  }

  /** One call: its JSON answer (null for an empty one), or a RosError. */
  call(method: "GET" | "PUT" | "PATCH" | "DELETE", path: string, body?: object, signal?: AbortSignal): Promise<unknown> {
    const o = this.opts;
    const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const url = new URL(o.base.pathname + path, o.base);
    const label = `${method} ${this.where}${path.replace(/\?.*$/, "")}`;
    return new Promise<unknown>((resolve, reject) => {
      if (signal?.aborted) {
        reject(new RosError(`${label}: cancelled`, "cancelled"));
        return;
      }
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const finish = (err: RosError | null, value?: unknown): void => {
        if (settled) return;
        settled = true;
        for (const t of timers) clearTimeout(t);
        signal?.removeEventListener("abort", onAbort);
        if (err) {
          req.destroy();
          reject(err);
        } else resolve(value);
      };
      const onAbort = (): void => finish(new RosError(`${label}: cancelled`, "cancelled"));
      const headers: Record<string, string> = { authorization: this.auth, accept: "application/json" };
      if (payload) {
        headers["content-type"] = "application/json";
        headers["content-length"] = String(payload.length);
      }
      const send = this.secure ? https.request : http.request;
      const req = send(url, { method, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) finish(new RosError(`${label}: the answer is larger than ${MAX_ANSWER_BYTES} bytes`, "answer"));
          else chunks.push(chunk);
        });
        res.on("error", (err) => finish(new RosError(`${label}: ${err.message}`, "network")));
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown = null;
          if (text.trim() !== "") {
            try {
              json = JSON.parse(text);
            } catch {
              if (status >= 200 && status < 300) return finish(new RosError(`${label}: the answer is not JSON`, "answer"));
            }
          }
          if (status >= 200 && status < 300) return finish(null, json);
          const e = (json ?? {}) as { message?: unknown; detail?: unknown };
          const detail = typeof e.detail === "string" ? e.detail : typeof e.message === "string" ? e.message : "";
          const words = status === 401 ? "RouterOS refused the username or password" : status === 403 ? "the RouterOS user may not do this (its group needs the api/rest-api, read and write policies)" : `${status} ${res.statusMessage ?? ""}`.trim();
          finish(new RosError(`${label}: ${words}${detail && status !== 401 ? `: ${detail}` : ""}`, "status", status, detail));
        });
      });
      req.on("error", (err: NodeJS.ErrnoException) => {
        const tls = TLS_CODES.test(err.code ?? "");
        finish(new RosError(`${label}: ${tls ? "TLS: " : ""}${err.message}`, tls ? "tls" : "network"));
      });
      req.on("socket", (socket: Socket) => {
        if (o.connectTimeoutMs === undefined || !socket.connecting) return;
        const t = setTimeout(() => finish(new RosError(`${label}: no connection within ${o.connectTimeoutMs}ms`, "timeout")), o.connectTimeoutMs);
        timers.push(t);
        socket.once(this.secure ? "secureConnect" : "connect", () => clearTimeout(t));
      });
      if (o.idleTimeoutMs !== undefined) req.setTimeout(o.idleTimeoutMs, () => finish(new RosError(`${label}: no data for ${o.idleTimeoutMs}ms`, "timeout")));
      timers.push(setTimeout(() => finish(new RosError(`${label}: no answer within ${o.timeoutMs}ms`, "timeout")), o.timeoutMs));
      signal?.addEventListener("abort", onAbort, { once: true });
      req.end(payload ?? undefined);
    });
  }
}

function rowsOf(value: unknown): RosRow[] {
  if (!Array.isArray(value)) throw new RosError("the router's answer is not a list of rows", "answer");
  return value.filter((r): r is RosRow => typeof r === "object" && r !== null && typeof (r as { ".id"?: unknown })[".id"] === "string");
}
