// Where a replica's configuration comes from (`sluice start --config-from URL`): the primary's
// GET /api/config, with the primary's API credentials (basic auth) and, for https, an optional CA.
// Credentials come from `--config-from-auth-file` or SLUICE_CONFIG_FROM_AUTH (user:password) and
// are never printed: the URL is shown without them. The request goes through the shared outbound
// GET (src/net/http-get.ts): one deadline for the whole pull (--config-from-timeout: a primary that
// trickles still ends on time), at most the replica's api.http.limits.body_bytes, no redirect
// followed; the answer's `version` must be the sha256 of its `content`.

import { readFileSync } from "node:fs";
import { contentVersion } from "../config/load.js";
import { DEFAULT_BODY_BYTES } from "../config/limits.js";
import { parseDuration } from "../engine/duration.js";
import { getBuffer } from "../net/http-get.js";
import type { Fetched } from "../../machines/config-follow.machine.js";

export const AUTH_ENV = "SLUICE_CONFIG_FROM_AUTH";
export const DEFAULT_POLL = "5s";
/** Largest answer read from the primary when the replica has no api.http.limits.body_bytes of its own. */
export const MAX_CONFIG_BYTES = DEFAULT_BODY_BYTES;
export const DEFAULT_TIMEOUT = "10s";

export interface ConfigSource {
  /** Base URL of the primary's API, without credentials. */
  url: URL;
  /** `user:password`, or null. */
  auth: string | null;
  /** PEM CA for an https primary with its own CA. */
  ca: Buffer | null;
  intervalMs: number;
  /** The whole pull (connect, headers, body) ends within this. */
  timeoutMs: number;
}

export interface SourceOptions {
  url: string;
  authFile?: string;
  caFile?: string;
  poll?: string;
  timeout?: string;
  env: NodeJS.ProcessEnv;
}

export class SourceError extends Error {}

/** Checks and reads the options (files included); throws SourceError saying what is wrong. */
export function configSource(o: SourceOptions): ConfigSource {
  let url: URL;
  try {
    url = new URL(o.url);
  } catch {
    throw new SourceError("--config-from must be an http:// or https:// URL of the primary's API");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new SourceError("--config-from must be an http:// or https:// URL of the primary's API");
  let auth = url.username ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : null;
  url.username = "";
  url.password = "";
  if (o.authFile !== undefined) {
    try {
      auth = readFileSync(o.authFile, "utf8").split(/\r?\n/)[0].trim();
    } catch (err) {
      throw new SourceError(`cannot read --config-from-auth-file ${o.authFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  } else if (o.env[AUTH_ENV]) auth = o.env[AUTH_ENV];
  if (auth !== null && !auth.includes(":")) throw new SourceError("the primary's credentials must be written user:password");
  let ca: Buffer | null = null;
  if (o.caFile !== undefined) {
    try {
      ca = readFileSync(o.caFile);
    } catch (err) {
      throw new SourceError(`cannot read --config-from-ca ${o.caFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  let intervalMs: number;
  try {
    intervalMs = parseDuration(o.poll ?? DEFAULT_POLL);
  } catch (err) {
    throw new SourceError(`--config-poll: ${(err as Error).message}`);
  }
  if (intervalMs < 200 || intervalMs > 3_600_000) throw new SourceError("--config-poll must be between 200ms and 1h");
  let timeoutMs: number;
  try {
    timeoutMs = parseDuration(o.timeout ?? DEFAULT_TIMEOUT);
  } catch (err) {
    throw new SourceError(`--config-from-timeout: ${(err as Error).message}`);
  }
  if (timeoutMs < 100 || timeoutMs > 600_000) throw new SourceError("--config-from-timeout must be between 100ms and 10m");
  return { url, auth, ca, intervalMs, timeoutMs };
}

/** The primary's URL as logs and the API show it (never with credentials). */
export function sourceName(s: ConfigSource): string {
  return s.url.origin + s.url.pathname.replace(/\/$/, "");
}

/** GET <primary>/api/config within the deadline and at most `maxBytes`: the configuration text and its version. Throws saying why not. */
export async function fetchConfig(s: ConfigSource, maxBytes = MAX_CONFIG_BYTES, signal?: AbortSignal): Promise<Fetched> {
  const target = new URL(`${s.url.pathname.replace(/\/$/, "")}/api/config`, s.url);
  // A fresh connection per poll: nothing is held open to the primary between polls.
  const { status, body } = await getBuffer(target, {
    timeoutMs: s.timeoutMs,
    maxBytes,
    accept: "application/json",
    authorization: s.auth !== null ? { origin: target.origin, value: `Basic ${Buffer.from(s.auth).toString("base64")}` } : null,
    ca: s.ca,
    maxRedirects: 0,
    anyStatus: true,
    signal,
    settings: { timeout: "--config-from-timeout", maxBytes: "api.http.limits.body_bytes" },
  });
  return readAnswer(status, body.toString("utf8"));
}

function readAnswer(status: number, text: string): Fetched {
  let body: { content?: unknown; version?: unknown; code?: unknown; message?: unknown };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    throw new Error(`HTTP ${status}: the answer is not JSON`);
  }
  if (status !== 200) throw new Error(`HTTP ${status}${typeof body.code === "string" ? ` ${body.code}` : ""}${typeof body.message === "string" ? `: ${body.message}` : ""}`);
  if (typeof body.content !== "string" || typeof body.version !== "string") throw new Error("the answer has no content and version");
  if (contentVersion(body.content) !== body.version.toLowerCase()) throw new Error("the answer's version does not match its content");
  return { content: body.content, version: body.version.toLowerCase() };
}
