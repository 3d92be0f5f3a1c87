// One download: GET an http(s) URL through the shared outbound GET (src/net/http-get.ts: one
// deadline for the whole request, a byte cap, redirects kept off this host's other services and the
// management API) and stream the body into a temp file beside the target, which replaces the target
// only when the whole body arrived within the limits (src/config/atomic-file.ts). Any failure leaves
// the previous file as it was.

import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { replaceFileAtomically } from "../../../config/atomic-file.js";
import { HttpError, openGet } from "../../../net/http-get.js";
import type { Outbound } from "../../../net/outbound.js";

export interface FetchOptions {
  /** The whole download (connect, every redirect, the body) must finish within this. */
  timeoutMs: number;
  maxBytes: number;
  insecureSkipVerify: boolean;
  /** The egress profile (network.outbound) the request goes out through; null or absent: direct. */
  outbound?: Outbound | null;
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

/** The item's own words for a failed GET (the URL is logged beside them). */
function explain(err: unknown, opts: FetchOptions): Error {
  if (!(err instanceof HttpError)) return err instanceof Error ? err : new Error(String(err));
  switch (err.kind) {
    case "deadline":
      return new DownloadTimeoutError(opts.timeoutMs);
    case "too_large":
      return new Error(`the file is larger than max_bytes (${opts.maxBytes})`, { cause: err });
    case "cancelled":
      return new Error("cancelled", { cause: err });
    default:
      return new Error(err.reason, { cause: err });
  }
}

/** Downloads `url` to `target`; resolves with the bytes written. Rejects (DownloadTimeoutError on time) leaving `target` untouched. */
export async function downloadFile(url: string, target: string, opts: FetchOptions): Promise<number> {
  const settings = { timeout: "timeout", maxBytes: "max_bytes" };
  try {
    const answer = await openGet(url, { timeoutMs: opts.timeoutMs, maxBytes: opts.maxBytes, insecureSkipVerify: opts.insecureSkipVerify, outbound: opts.outbound ?? null, signal: opts.signal, settings });
    let size = 0;
    try {
      await mkdir(dirname(target), { recursive: true });
      await replaceFileAtomically(
        target,
        async (handle) => {
          for await (const chunk of answer.body()) {
            size += chunk.length;
            await handle.write(chunk);
          }
        },
        "download",
      );
    } finally {
      answer.close();
    }
    return size;
  } catch (err) {
    throw explain(err, opts);
  }
}
