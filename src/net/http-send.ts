// The client of the `http_request` executor: requests of any method with a body, over keep-alive
// connections (per plugin instance, at most `maxSockets` open per origin), out through an egress
// profile (src/net/outbound.ts: source address, resolver, SOCKS5 proxy): plain http without a proxy
// through the lean pool of http-pool.ts, https and anything proxied through Node's client with the
// profile's agents (which keep proxied connections alive too). One deadline for the whole call,
// redirects included; the answer's body is drained and discarded (past DRAIN_CAP the connection is
// closed instead). The address rules of outbound-policy.ts apply: never this process's management API,
// and a redirect reaches a local-only address only when it is the configured URL's own address and port.

import http, { type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";
import { isIP, type Socket } from "node:net";
import { guardedLookup, HopGuard } from "./outbound-policy.js";
import { showUrl } from "./http-get.js";
import type { Outbound } from "./outbound.js";
import { HttpPool, PoolRefusal, type Answer, type Cancel } from "./http-pool.js";

/** Bytes of an answer's body read (and discarded) to keep its connection; a longer body closes it. */
const DRAIN_CAP = 64 * 1024;

export type SendFailure = "timeout" | "status" | "network" | "refused" | "redirects" | "cancelled";

export class SendError extends Error {
  constructor(
    message: string,
    readonly kind: SendFailure,
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = "SendError";
  }
}

export interface SendRequest {
  method: string;
  url: URL;
  headers: OutgoingHttpHeaders;
  body: Buffer | null;
}

export interface ClientOptions {
  timeoutMs: number;
  maxRedirects: number;
  insecureSkipVerify: boolean;
  /** The egress profile (DIRECT for none): source address, resolver, SOCKS5 proxy (which resolves names). */
  outbound: Outbound;
  /** Connections open at once per origin (requests beyond wait for one, within their deadline). */
  maxSockets: number;
}

const stripBrackets = (host: string): string => host.replace(/^\[|\]$/g, "");
const portOf = (url: URL): number => Number(url.port || (url.protocol === "https:" ? 443 : 80));

/** Headers a redirect to another origin does not carry. */
const CREDENTIAL_HEADERS = ["authorization", "cookie", "proxy-authorization"];

/** A request's deadline and cancellation, seen by every hop. */
interface CallState extends Cancel {
  timedOut: boolean;
  aborted: boolean;
}

/** The request as HTTP/1.1 bytes for the lean pool (header values are checked already). */
function serialize(method: string, url: URL, headers: OutgoingHttpHeaders, body: Buffer | null): Buffer {
  let head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) head += `${name}: ${Array.isArray(value) ? value.join(", ") : String(value)}\r\n`;
  if (body !== null || method === "POST" || method === "PUT" || method === "PATCH") head += `Content-Length: ${body?.length ?? 0}\r\n`;
  head += "\r\n";
  const bytes = Buffer.from(head, "latin1");
  return body === null || body.length === 0 ? bytes : Buffer.concat([bytes, body]);
}

export class HookClient {
  private readonly agents: { http: http.Agent; https: http.Agent };
  /** Lean pools for plain-http origins reached without a proxy, by host:port. */
  private readonly pools = new Map<string, HttpPool>();

  /** Connections go through a SOCKS5 proxy, which resolves names (so only addresses in URLs can be judged). */
  private readonly proxied: boolean;

  constructor(private readonly o: ClientOptions) {
    const base = { keepAlive: true, maxSockets: o.maxSockets, maxFreeSockets: o.maxSockets, scheduling: "lifo" as const, rejectUnauthorized: !o.insecureSkipVerify };
    this.agents = { http: o.outbound.agent("http:", base), https: o.outbound.agent("https:", base) };
    this.proxied = o.outbound.proxy !== null;
  }

  /** Sends the request, following redirects; resolves with the final 2xx status, rejects with a SendError. */
  async send(req: SendRequest, signal?: AbortSignal): Promise<number> {
    const state: CallState = { cancel: null, timedOut: false, aborted: false };
    const stop = (why: "timedOut" | "aborted") => (): void => {
      state[why] = true;
      state.cancel?.(new Error(why === "timedOut" ? "deadline" : "cancelled"));
    };
    // One timer and one listener per call: AbortSignal.timeout/any per request cost more CPU than the request.
    const timer = setTimeout(stop("timedOut"), this.o.timeoutMs);
    const onAbort = stop("aborted");
    signal?.addEventListener("abort", onAbort);
    const guard = new HopGuard();
    let target = req.url;
    let method = req.method;
    let body = req.body;
    // Copied only when a redirect changes them.
    let headers: OutgoingHttpHeaders = req.headers;
    const origin = req.url.origin;
    try {
      if (signal?.aborted) state.aborted = true;
      for (let hop = 0; ; hop++) {
        if (state.timedOut || state.aborted) throw new Error("stopped");
        const a = await this.hop(target, method, headers, body, guard, hop, state);
        const status = a.status;
        if (status >= 300 && status < 400 && a.location !== null && this.o.maxRedirects > 0) {
          if (hop >= this.o.maxRedirects) throw new SendError(`${showUrl(target)}: more than ${this.o.maxRedirects} redirects`, "redirects", status);
          const next = new URL(a.location, target);
          if (next.protocol !== "http:" && next.protocol !== "https:") throw new SendError(`${showUrl(target)}: redirected to an unsupported URL scheme '${next.protocol}'`, "refused", status);
          headers = { ...headers };
          // 307 and 308 repeat the request; the others turn it into a GET without a body (as browsers do).
          if (status !== 307 && status !== 308 && method !== "HEAD") {
            method = "GET";
            body = null;
            for (const h of Object.keys(headers)) if (/^content-/i.test(h)) delete headers[h];
          }
          if (next.origin !== origin) for (const h of Object.keys(headers)) if (CREDENTIAL_HEADERS.includes(h.toLowerCase())) delete headers[h];
          target = next;
          continue;
        }
        if (status < 200 || status >= 300) throw new SendError(`${showUrl(target)}: HTTP ${status}${a.statusText ? ` ${a.statusText}` : ""}`, "status", status);
        return status;
      }
    } catch (err) {
      if (err instanceof SendError) throw err;
      if (state.timedOut) throw new SendError(`${showUrl(target)}: no answer within ${this.o.timeoutMs}ms`, "timeout");
      if (state.aborted) throw new SendError(`${showUrl(target)}: cancelled`, "cancelled");
      if (err instanceof PoolRefusal) throw new SendError(`${showUrl(target)}: ${err.message}`, "refused");
      throw new SendError(`${showUrl(target)}: ${err instanceof Error ? err.message : String(err)}`, "network");
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** One request; resolves once its answer has been read (the body discarded). */
  private hop(url: URL, method: string, headers: OutgoingHttpHeaders, body: Buffer | null, guard: HopGuard, hop: number, state: CallState): Promise<Answer> {
    const port = portOf(url);
    const host = stripBrackets(url.hostname);
    // The configured URL over plain http without a proxy: the lean pool (it refuses the management API itself).
    if (hop === 0 && url.protocol === "http:" && !this.proxied) {
      const key = `${host}|${port}`;
      let pool = this.pools.get(key);
      const route = { lookup: this.o.outbound.lookupFunction, ...(this.o.outbound.bind ? { localAddress: this.o.outbound.bind } : {}) };
      if (!pool) this.pools.set(key, (pool = new HttpPool(host, port, this.o.maxSockets, route)));
      // The guard learns the address, which a redirect back to a local address must match.
      return pool.request(serialize(method, url, headers, body), method === "HEAD", state).then((a) => {
        if (a.remote !== undefined) guard.judge(a.remote, port, 0);
        return a;
      });
    }
    // An address in the URL is never looked up, and a proxy resolves names itself: both are judged here.
    if (isIP(host) !== 0 || this.proxied) {
      const why = guard.judge(host, port, hop);
      if (why !== null) return Promise.reject(new SendError(`${showUrl(url)}: ${why}`, "refused"));
    }
    const secure = url.protocol === "https:";
    let refusal: string | null = null;
    // Redirects go out on a connection of their own (through the profile's resolver and source address),
    // each address judged before connecting; the first hop and anything proxied use the profile's agents.
    const pooled = hop === 0 || this.proxied;
    const direct = {
      agent: false as const,
      rejectUnauthorized: !this.o.insecureSkipVerify,
      ...(this.o.outbound.bind ? { localAddress: this.o.outbound.bind } : {}),
      lookup: guardedLookup(
        (address) => guard.judge(address, port, hop),
        (why) => (refusal = why),
        this.o.outbound.lookupFunction,
      ),
    };
    const sent: OutgoingHttpHeaders = body === null ? headers : { ...headers, "content-length": body.length };
    return new Promise((resolve, reject) => {
      const req = (secure ? https : http).request(url, {
        method,
        headers: sent,
        ...(pooled ? { agent: secure ? this.agents.https : this.agents.http } : direct),
      });
      state.cancel = (why) => req.destroy(why);
      req.on("response", (res) => {
        // A pooled connection made for another request was judged then; this request's guard learns its address now.
        const remote = (res.socket as Socket | null)?.remoteAddress;
        const why = hop === 0 && remote && !this.proxied ? guard.judge(remote, port, 0) : null;
        if (why !== null) {
          res.destroy();
          reject(new SendError(`${showUrl(url)}: ${why}`, "refused"));
          return;
        }
        drain(res).then(() => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? "", location: res.headers.location ?? null }), reject);
      });
      req.on("error", (err) => reject(refusal !== null ? new SendError(`${showUrl(url)}: ${refusal}`, "refused") : err));
      req.on("close", () => (state.cancel = null));
      req.end(body ?? undefined);
    });
  }

  /** Closes every connection (the plugin is going away). */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
    for (const pool of this.pools.values()) pool.close();
  }
}

/** Reads the body to its end (so the connection can serve the next request), or closes it past the cap. */
function drain(res: IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    let read = 0;
    res.on("data", (chunk: Buffer) => {
      read += chunk.length;
      if (read > DRAIN_CAP) {
        res.destroy();
        resolve();
      }
    });
    res.on("end", () => resolve());
    res.on("error", (err) => (read > DRAIN_CAP ? resolve() : reject(err)));
  });
}
