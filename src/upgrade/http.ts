// GET requests of the upgrade: a deadline per request, a byte cap, redirects followed by hand so
// the release host's token never travels to another origin, and an optional SOCKS5 proxy.

import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { VERSION } from "../version.js";
import { socks5Connect } from "./socks5.js";

const MAX_REDIRECTS = 5;

export interface RequestLimits {
  /** The whole request (connect, headers, body) must finish within this. */
  timeoutMs: number;
  maxBytes: number;
  /** The credential of the release host: sent only to `origin`, never to where it redirects. */
  token: { origin: string; value: string } | null;
  socks5: string | null;
  accept?: string;
}

export class HttpError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** An address for messages: origin and path, never the query string (signed URLs carry secrets there). */
export function showUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function connectVia(proxy: string, url: URL): http.RequestOptions["createConnection"] {
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  return (_opts, done: (err: Error | null, socket: Duplex) => void) => {
    socks5Connect(proxy, url.hostname, port).then(
      (socket) => done(null, url.protocol === "https:" ? tls.connect({ socket, servername: url.hostname.replace(/^\[|\]$/g, "") }) : socket),
      (err: Error) => done(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
}

interface Hop {
  status: number;
  location: string | null;
}

/** One request; the body (2xx only) goes to `onChunk`. */
function once(url: URL, limits: RequestLimits, signal: AbortSignal, onChunk: (chunk: Buffer) => void): Promise<Hop> {
  const headers: Record<string, string> = { "user-agent": `sluice/${VERSION}`, accept: limits.accept ?? "*/*" };
  if (limits.token && url.origin === limits.token.origin) headers.authorization = `Bearer ${limits.token.value}`;
  const lib = url.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(url, {
      method: "GET",
      headers,
      signal,
      // Without an agent, http uses createConnection for this one request.
      ...(limits.socks5 ? { createConnection: connectVia(limits.socks5, url) } : {}),
    });
    req.on("error", (err) => reject(signal.aborted ? new HttpError(`${showUrl(url)}: no answer within ${limits.timeoutMs / 1000}s (upgrade.timeout)`) : new HttpError(`${showUrl(url)}: ${err.message}`)));
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400 && res.headers.location) {
        res.resume();
        resolve({ status, location: res.headers.location });
        return;
      }
      if (status < 200 || status >= 300) {
        res.resume();
        reject(new HttpError(`${showUrl(url)}: HTTP ${status}`, status));
        return;
      }
      const declared = Number(res.headers["content-length"] ?? NaN);
      if (declared > limits.maxBytes) {
        req.destroy();
        reject(new HttpError(`${showUrl(url)}: ${declared} bytes, more than the limit of ${limits.maxBytes} bytes (upgrade.max_download_bytes)`));
        return;
      }
      let received = 0;
      res.on("data", (chunk: Buffer) => {
        received += chunk.length;
        if (received > limits.maxBytes) {
          req.destroy(new Error(`more than the limit of ${limits.maxBytes} bytes (upgrade.max_download_bytes)`));
          return;
        }
        onChunk(chunk);
      });
      res.on("end", () => resolve({ status, location: null }));
      res.on("error", (err) => reject(new HttpError(`${showUrl(url)}: ${err.message}`)));
    });
    req.end();
  });
}

/** GET `url`, following redirects, within the request's deadline; the body streams to `onChunk`. */
export async function httpGet(url: string, limits: RequestLimits, onChunk: (chunk: Buffer) => void): Promise<void> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), limits.timeoutMs);
  try {
    let target = new URL(url);
    for (let hop = 0; ; hop++) {
      if (target.protocol !== "http:" && target.protocol !== "https:") throw new HttpError(`${showUrl(target)}: only http and https URLs are fetched`);
      const { location } = await once(target, limits, controller.signal, onChunk);
      if (location === null) return;
      if (hop >= MAX_REDIRECTS) throw new HttpError(`${showUrl(target)}: more than ${MAX_REDIRECTS} redirects`);
      target = new URL(location, target);
    }
  } finally {
    clearTimeout(timer);
  }
}

/** GET `url` and parse its JSON body (at most `limits.maxBytes`). */
export async function getJson(url: string, limits: RequestLimits): Promise<unknown> {
  const chunks: Buffer[] = [];
  await httpGet(url, { ...limits, accept: limits.accept ?? "application/vnd.github+json, application/json" }, (c) => chunks.push(c));
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(`${showUrl(new URL(url))}: the answer is not JSON`);
  }
}
