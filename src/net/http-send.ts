// The client of the `http_request` executor: requests of any method with a body, over keep-alive
// connections (one pool per plugin instance, at most `maxSockets` open), optionally through a SOCKS5
// proxy (the pool keeps those connections alive too). One deadline for the whole call, redirects
// included; the answer's body is drained and discarded (past DRAIN_CAP the connection is closed
// instead). The address rules of outbound-policy.ts apply: never this process's management API, and a
// redirect reaches a local-only address only when it is the configured URL's own address and port.

import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import http, { type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { HopGuard } from "./outbound-policy.js";
import { showUrl } from "./http-get.js";
import { socks5Connect } from "./socks5.js";

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
  /** `socks5://[user:pass@]host:port`; the proxy resolves names. */
  socks5: string | null;
  /** Connections open at once per origin (requests beyond wait for one, within their deadline). */
  maxSockets: number;
}

const stripBrackets = (host: string): string => host.replace(/^\[|\]$/g, "");
const portOf = (url: URL): number => Number(url.port || (url.protocol === "https:" ? 443 : 80));

/** A pool whose connections go through the SOCKS5 proxy (and TLS on top for https). */
function socksAgent(proxy: string, secure: boolean, base: http.AgentOptions & tls.ConnectionOptions): http.Agent {
  const connect = (opts: { host?: string | null; port?: number | null; servername?: string }, done: (err: Error | null, socket: Duplex) => void): undefined => {
    const host = stripBrackets(opts.host ?? "");
    socks5Connect(proxy, host, Number(opts.port)).then(
      (socket) => done(null, secure ? tls.connect({ socket, servername: isIP(host) === 0 ? host : undefined, rejectUnauthorized: base.rejectUnauthorized }) : socket),
      (err: Error) => done(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
  const agent = secure ? new https.Agent(base) : new http.Agent(base);
  // Node's Agent accepts a createConnection that answers through its callback.
  Object.assign(agent, { createConnection: connect });
  return agent;
}

/** dns.lookup whose every address is judged before anything connects to it. */
function guardedLookup(judge: (address: string) => string | null, refused: (why: string) => void): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      for (const a of addresses) {
        const why = judge(a.address);
        if (why !== null) {
          refused(why);
          return callback(Object.assign(new Error(why), { code: "EREFUSED_BY_POLICY" }), "", 0);
        }
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 0);
      callback(null, first.address, first.family);
    });
  };
}

/** Headers a redirect to another origin does not carry. */
const CREDENTIAL_HEADERS = ["authorization", "cookie", "proxy-authorization"];

export class HookClient {
  private readonly agents: { http: http.Agent; https: http.Agent };

  constructor(private readonly o: ClientOptions) {
    const base = { keepAlive: true, maxSockets: o.maxSockets, maxFreeSockets: o.maxSockets, scheduling: "lifo" as const, rejectUnauthorized: !o.insecureSkipVerify };
    this.agents = o.socks5
      ? { http: socksAgent(o.socks5, false, base), https: socksAgent(o.socks5, true, base) }
      : { http: new http.Agent(base), https: new https.Agent(base) };
  }

  /** Sends the request, following redirects; resolves with the final 2xx status, rejects with a SendError. */
  async send(req: SendRequest, signal?: AbortSignal): Promise<number> {
    const deadline = AbortSignal.timeout(this.o.timeoutMs);
    const both = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const guard = new HopGuard();
    let target = req.url;
    let method = req.method;
    let body = req.body;
    const headers: OutgoingHttpHeaders = { ...req.headers };
    const origin = req.url.origin;
    try {
      for (let hop = 0; ; hop++) {
        const res = await this.hop(target, method, headers, body, guard, hop, both);
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (status >= 300 && status < 400 && location !== undefined && this.o.maxRedirects > 0) {
          await drain(res);
          if (hop >= this.o.maxRedirects) throw new SendError(`${showUrl(target)}: more than ${this.o.maxRedirects} redirects`, "redirects", status);
          const next = new URL(location, target);
          if (next.protocol !== "http:" && next.protocol !== "https:") throw new SendError(`${showUrl(target)}: redirected to an unsupported URL scheme '${next.protocol}'`, "refused", status);
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
        await drain(res);
        if (status < 200 || status >= 300) throw new SendError(`${showUrl(target)}: HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ""}`, "status", status);
        return status;
      }
    } catch (err) {
      if (err instanceof SendError) throw err;
      if (deadline.aborted) throw new SendError(`${showUrl(target)}: no answer within ${this.o.timeoutMs}ms`, "timeout");
      if (signal?.aborted) throw new SendError(`${showUrl(target)}: cancelled`, "cancelled");
      throw new SendError(`${showUrl(target)}: ${err instanceof Error ? err.message : String(err)}`, "network");
    }
  }

  /** One request: the first hop over the pool, redirects on a connection of their own (judged as they connect). */
  private hop(url: URL, method: string, headers: OutgoingHttpHeaders, body: Buffer | null, guard: HopGuard, hop: number, signal: AbortSignal): Promise<IncomingMessage> {
    const port = portOf(url);
    const host = stripBrackets(url.hostname);
    // An address in the URL is never looked up, and a proxy resolves names itself: both are judged here.
    if (isIP(host) !== 0 || this.o.socks5) {
      const why = guard.judge(host, port, hop);
      if (why !== null) return Promise.reject(new SendError(`${showUrl(url)}: ${why}`, "refused"));
    }
    const secure = url.protocol === "https:";
    let refusal: string | null = null;
    const lookup = guardedLookup(
      (address) => guard.judge(address, port, hop),
      (why) => (refusal = why),
    );
    const pooled = hop === 0 || this.o.socks5 !== null;
    const sent: OutgoingHttpHeaders = body === null ? headers : { ...headers, "content-length": body.length };
    return new Promise((resolve, reject) => {
      const req = (secure ? https : http).request(url, {
        method,
        headers: sent,
        signal,
        lookup,
        ...(pooled ? { agent: secure ? this.agents.https : this.agents.http } : { agent: false as const, rejectUnauthorized: !this.o.insecureSkipVerify }),
      });
      req.on("response", (res) => {
        // A pooled connection made for another request was judged then; this request's guard learns its address now.
        const remote = (res.socket as Socket | null)?.remoteAddress;
        if (hop === 0 && remote && this.o.socks5 === null) {
          const why = guard.judge(remote, port, 0);
          if (why !== null) {
            res.destroy();
            reject(new SendError(`${showUrl(url)}: ${why}`, "refused"));
            return;
          }
        }
        resolve(res);
      });
      req.on("error", (err) => reject(refusal !== null ? new SendError(`${showUrl(url)}: ${refusal}`, "refused") : err));
      req.end(body ?? undefined);
    });
  }

  /** Closes every connection (the plugin is going away). */
  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
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
