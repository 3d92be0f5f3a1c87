// Every outbound GET of the program: download items, the upgrade's release host and assets, a
// replica's pull from its primary. One deadline for the whole request (connect, headers, body and
// every redirect: a peer that trickles a byte at a time still ends on time), a byte cap, redirects
// followed by hand (at most MAX_REDIRECTS, http and https only, a credential only to its origin)
// under the address rules of outbound-policy.ts, checked on the address actually connected to;
// optionally through a SOCKS5 proxy (which resolves names itself) or an outbound profile (bind
// address, proxy, resolver: src/net/outbound.ts).

import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { VERSION } from "../version.js";
import type { Outbound } from "./outbound.js";
import { guardedLookup, HopGuard } from "./outbound-policy.js";
import { socks5Connect } from "./socks5.js";

export const MAX_REDIRECTS = 5;
export const SUPPORTED_PROTOCOLS = new Set(["http:", "https:"]);

export interface GetOptions {
  /** The whole request (connect, headers, body, every redirect) must finish within this. */
  timeoutMs: number;
  maxBytes: number;
  /** A bearer token (the release host's): sent only to `origin`, never to where it redirects. */
  token?: { origin: string; value: string } | null;
  /** A whole Authorization header value (basic auth to a primary), likewise only to `origin`. */
  authorization?: { origin: string; value: string } | null;
  socks5?: string | null;
  /** Egress profile (network.outbound): its bind address, its proxy (instead of `socks5`) and its resolver. */
  outbound?: Outbound | null;
  accept?: string;
  /** PEM CA for an https peer with its own CA. */
  ca?: Buffer | null;
  insecureSkipVerify?: boolean;
  /** 0: a 3xx is an answer like any other. */
  maxRedirects?: number;
  /** Answer every status with its body (the caller reads error bodies); otherwise non-2xx fails. */
  anyStatus?: boolean;
  /** Cancels the request (not a timeout: the error says "cancelled"). */
  signal?: AbortSignal;
  /** The settings that set the deadline and the cap, named in messages (the upgrade's by default: its first user). */
  settings?: { timeout: string; maxBytes: string };
}

/** The upgrade's name for its options. */
export type RequestLimits = GetOptions;

export type GetFailure = "deadline" | "too_large" | "status" | "redirects" | "scheme" | "refused" | "truncated" | "cancelled" | "network" | "answer";

export class HttpError extends Error {
  /** The message without the URL in front. */
  readonly reason: string;
  constructor(
    message: string,
    readonly status: number | null = null,
    readonly kind: GetFailure = status === null ? "answer" : "status",
    reason?: string,
  ) {
    super(message);
    this.name = "HttpError";
    this.reason = reason ?? message;
  }
}

/** An address for messages: origin and path, never the query string (signed URLs carry secrets there). */
export function showUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

const seconds = (ms: number): string => (ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);
const DEFAULT_SETTINGS = { timeout: "upgrade.timeout", maxBytes: "upgrade.max_download_bytes" };

function failure(url: URL, kind: GetFailure, reason: string, status: number | null = null): HttpError {
  return new HttpError(`${showUrl(url)}: ${reason}`, status, kind, reason);
}

/** The final answer's head; its body is read (within cap and deadline) through `body()`, or dropped with `close()`. */
export interface OpenAnswer {
  status: number;
  statusMessage: string;
  url: URL;
  headers: IncomingHttpHeaders;
  /** content-length, when the peer declared one. */
  declared: number | null;
  body(): AsyncGenerator<Buffer, void, undefined>;
  close(): void;
}

const stripBrackets = (host: string): string => host.replace(/^\[|\]$/g, "");
const portOf = (url: URL): number => Number(url.port || (url.protocol === "https:" ? 443 : 80));

function connectVia(proxy: string, url: URL, o: GetOptions): http.RequestOptions["createConnection"] {
  return (_opts, done: (err: Error | null, socket: Duplex) => void) => {
    socks5Connect(proxy, url.hostname, portOf(url), { bind: o.outbound?.bind ?? null }).then(
      (socket) =>
        done(
          null,
          url.protocol === "https:" ? tls.connect({ socket, servername: stripBrackets(url.hostname), rejectUnauthorized: !o.insecureSkipVerify, ...(o.ca ? { ca: o.ca } : {}) }) : socket,
        ),
      (err: Error) => done(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
}

/** One hop: resolves with the response head. */
function request(url: URL, o: GetOptions, guard: HopGuard, hop: number, signal: AbortSignal): Promise<IncomingMessage> {
  const port = portOf(url);
  const host = stripBrackets(url.hostname);
  const proxy = o.outbound?.socks5 ?? o.socks5 ?? null;
  const bind = o.outbound?.bind ?? null;
  // An address in the URL is never looked up, and a proxy resolves names itself: both are judged here.
  if (isIP(host) !== 0 || proxy) {
    const why = guard.judge(host, port, hop);
    if (why !== null) return Promise.reject(failure(url, "refused", why));
  }
  const headers: Record<string, string> = { "user-agent": `sluice/${VERSION}`, accept: o.accept ?? "*/*", "accept-encoding": "identity" };
  for (const credential of [o.token ? { origin: o.token.origin, value: `Bearer ${o.token.value}` } : null, o.authorization ?? null]) {
    if (credential && url.origin === credential.origin) headers.authorization = credential.value;
  }
  let refusal: string | null = null;
  const lib = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(url, {
      method: "GET",
      headers,
      signal,
      ...(url.protocol === "https:" ? { rejectUnauthorized: !o.insecureSkipVerify, ...(o.ca ? { ca: o.ca } : {}) } : {}),
      // A fresh connection per request; without an agent, http uses createConnection for this one request.
      ...(proxy
        ? { createConnection: connectVia(proxy, url, o) }
        : {
            agent: false as const,
            ...(bind ? { localAddress: bind } : {}),
            lookup: guardedLookup(
              (address) => guard.judge(address, port, hop),
              (why) => (refusal = why),
              o.outbound?.lookupFunction,
            ),
          }),
    });
    req.on("response", resolve);
    req.on("error", (err) => reject(refusal !== null ? failure(url, "refused", refusal) : err));
    req.end();
  });
}

/** Turns whatever ended the request into an HttpError saying why. */
function explain(err: unknown, url: URL, o: GetOptions, deadline: AbortSignal): HttpError {
  if (err instanceof HttpError) return err;
  if (deadline.aborted) return failure(url, "deadline", `no answer within ${seconds(o.timeoutMs)} (${(o.settings ?? DEFAULT_SETTINGS).timeout})`);
  if (o.signal?.aborted) return failure(url, "cancelled", "cancelled");
  return failure(url, "network", err instanceof Error ? err.message : String(err));
}

/** GET `url`, following redirects; resolves with the final answer's head once it arrives (the deadline keeps running for its body). */
export async function openGet(url: string | URL, o: GetOptions): Promise<OpenAnswer> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), o.timeoutMs);
  const signal = o.signal ? AbortSignal.any([o.signal, deadline.signal]) : deadline.signal;
  const settings = o.settings ?? DEFAULT_SETTINGS;
  const maxRedirects = o.maxRedirects ?? MAX_REDIRECTS;
  const guard = new HopGuard();
  let target = new URL(url);
  let res: IncomingMessage | null = null;
  const finish = (): void => {
    clearTimeout(timer);
    res?.destroy();
  };
  try {
    for (let hop = 0; ; hop++) {
      if (!SUPPORTED_PROTOCOLS.has(target.protocol)) {
        throw failure(target, "scheme", hop === 0 ? "only http and https URLs are fetched" : `redirected to an unsupported URL scheme '${target.protocol}'`);
      }
      res = await request(target, o, guard, hop, signal);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && location && maxRedirects > 0) {
        res.destroy();
        if (hop >= maxRedirects) throw failure(target, "redirects", `more than ${maxRedirects} redirects`);
        target = new URL(location, target);
        continue;
      }
      if (!o.anyStatus && (status < 200 || status >= 300)) throw failure(target, "status", `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ""}`, status);
      const length = Number(res.headers["content-length"] ?? NaN);
      const declared = Number.isFinite(length) ? length : null;
      if (declared !== null && declared > o.maxBytes) throw failure(target, "too_large", `${declared} bytes, more than the limit of ${o.maxBytes} bytes (${settings.maxBytes})`);
      return answer(res, target, declared, o, deadline.signal, finish);
    }
  } catch (err) {
    finish();
    throw explain(err, target, o, deadline.signal);
  }
}

function answer(res: IncomingMessage, url: URL, declared: number | null, o: GetOptions, deadline: AbortSignal, finish: () => void): OpenAnswer {
  const settings = o.settings ?? DEFAULT_SETTINGS;
  return {
    status: res.statusCode ?? 0,
    statusMessage: res.statusMessage ?? "",
    url,
    headers: res.headers,
    declared,
    close: finish,
    async *body() {
      let received = 0;
      try {
        for await (const chunk of res as AsyncIterable<Buffer>) {
          received += chunk.length;
          if (received > o.maxBytes) throw failure(url, "too_large", `more than the limit of ${o.maxBytes} bytes (${settings.maxBytes})`);
          yield chunk;
        }
        // A connection closed early without an error still leaves a short body.
        if (declared !== null && received !== declared) throw failure(url, "truncated", `the body ended after ${received} of ${declared} bytes`);
      } catch (err) {
        throw explain(err, url, o, deadline);
      } finally {
        finish();
      }
    },
  };
}

/** GET `url` within the deadline and cap; the body streams to `onChunk` (awaited: a slow sink slows the read, not the deadline). */
export async function httpGet(url: string, o: GetOptions, onChunk: (chunk: Buffer) => unknown): Promise<{ status: number; url: URL }> {
  const a = await openGet(url, o);
  for await (const chunk of a.body()) {
    const written = onChunk(chunk);
    if (written instanceof Promise) await written;
  }
  return { status: a.status, url: a.url };
}

/** GET `url` into memory (at most `o.maxBytes`). */
export async function getBuffer(url: string | URL, o: GetOptions): Promise<{ status: number; body: Buffer }> {
  const a = await openGet(url, o);
  const chunks: Buffer[] = [];
  for await (const chunk of a.body()) chunks.push(chunk);
  return { status: a.status, body: Buffer.concat(chunks) };
}

/** GET `url` and parse its JSON body (at most `o.maxBytes`). */
export async function getJson(url: string, o: GetOptions): Promise<unknown> {
  const { body } = await getBuffer(url, { ...o, accept: o.accept ?? "application/vnd.github+json, application/json" });
  try {
    return JSON.parse(body.toString("utf8")) as unknown;
  } catch {
    throw new HttpError(`${showUrl(new URL(url))}: the answer is not JSON`);
  }
}
