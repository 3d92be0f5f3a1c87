// One download: GET an http(s) URL (following a few redirects) and stream the body into a temp file
// beside the target, which replaces the target only when the whole body arrived within the time
// and size limits (src/config/atomic-file.ts). Any failure leaves the previous file as it was.

import { mkdir } from "node:fs/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { dirname } from "node:path";
import { replaceFileAtomically } from "../../../config/atomic-file.js";
import { VERSION } from "../../../version.js";

export interface FetchOptions {
  timeoutMs: number;
  maxBytes: number;
  insecureSkipVerify: boolean;
  /** Aborts the download (the plugin is going, or the cron run that asked was cancelled). */
  signal?: AbortSignal;
}

/** The item's time limit ran out (counted apart from other failures). */
export class DownloadTimeoutError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = "DownloadTimeoutError";
  }
}

const MAX_REDIRECTS = 5;
export const SUPPORTED_PROTOCOLS = new Set(["http:", "https:"]);

/** Sends the GET and resolves with the response head; the request is destroyed when `signal` aborts. */
function get(url: URL, opts: FetchOptions, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const options = {
      method: "GET",
      headers: { "user-agent": `sluice/${VERSION}`, accept: "*/*", "accept-encoding": "identity" },
      agent: false as const,
      signal,
      ...(url.protocol === "https:" ? { rejectUnauthorized: !opts.insecureSkipVerify } : {}),
    };
    const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, options, resolve);
    req.on("error", reject);
    req.end();
  });
}

/** Follows up to MAX_REDIRECTS redirects (http and https only); resolves with a 2xx response. */
async function open(url: URL, opts: FetchOptions, signal: AbortSignal): Promise<IncomingMessage> {
  let at = url;
  for (let hop = 0; ; hop++) {
    const res = await get(at, opts, signal);
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) return res;
    res.resume();
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      if (hop >= MAX_REDIRECTS) throw new Error(`more than ${MAX_REDIRECTS} redirects`);
      const next = new URL(location, at);
      if (!SUPPORTED_PROTOCOLS.has(next.protocol)) throw new Error(`redirected to an unsupported URL scheme '${next.protocol}'`);
      at = next;
      continue;
    }
    throw new Error(`HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ""}`);
  }
}

/** Downloads `url` to `target`; resolves with the bytes written. Rejects (DownloadTimeoutError on time) leaving `target` untouched. */
export async function downloadFile(url: string, target: string, opts: FetchOptions): Promise<number> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  try {
    const res = await open(new URL(url), opts, signal);
    const declared = Number(res.headers["content-length"]);
    if (Number.isFinite(declared) && declared > opts.maxBytes) {
      res.destroy();
      throw new Error(`the file is ${declared} bytes, more than max_bytes (${opts.maxBytes})`);
    }
    await mkdir(dirname(target), { recursive: true });
    let size = 0;
    await replaceFileAtomically(
      target,
      async (handle) => {
        for await (const chunk of res as AsyncIterable<Buffer>) {
          size += chunk.length;
          if (size > opts.maxBytes) {
            res.destroy();
            throw new Error(`the file is larger than max_bytes (${opts.maxBytes})`);
          }
          await handle.write(chunk);
        }
        // A connection closed early without an error still leaves a short body.
        if (Number.isFinite(declared) && size !== declared) throw new Error(`the body ended after ${size} of ${declared} bytes`);
      },
      "download",
    );
    return size;
  } catch (err) {
    if (timeout.aborted && !opts.signal?.aborted) throw new DownloadTimeoutError(opts.timeoutMs);
    if (opts.signal?.aborted) throw new Error("cancelled", { cause: err });
    throw err;
  }
}
