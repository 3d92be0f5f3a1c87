// Where a replica's configuration comes from (`sluice start --config-from URL`): the primary's
// GET /api/config, with the primary's API credentials (basic auth) and, for https, an optional CA.
// Credentials come from `--config-from-auth-file` or SLUICE_CONFIG_FROM_AUTH (user:password) and
// are never printed: the URL is shown without them. The answer is bounded in size and time, and its
// `version` must be the sha256 of its `content`.

import http from "node:http";
import https from "node:https";
import { readFileSync } from "node:fs";
import { contentVersion } from "../config/load.js";
import { parseDuration } from "../engine/duration.js";
import type { Fetched } from "../../machines/config-follow.machine.js";

export const AUTH_ENV = "SLUICE_CONFIG_FROM_AUTH";
export const DEFAULT_POLL = "5s";
/** Largest configuration read from the primary. */
export const MAX_CONFIG_BYTES = 8 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 10_000;

export interface ConfigSource {
  /** Base URL of the primary's API, without credentials. */
  url: URL;
  /** `user:password`, or null. */
  auth: string | null;
  /** PEM CA for an https primary with its own CA. */
  ca: Buffer | null;
  intervalMs: number;
}

export interface SourceOptions {
  url: string;
  authFile?: string;
  caFile?: string;
  poll?: string;
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
  if (intervalMs < 1000 || intervalMs > 3_600_000) throw new SourceError("--config-poll must be between 1s and 1h");
  return { url, auth, ca, intervalMs };
}

/** The primary's URL as logs and the API show it (never with credentials). */
export function sourceName(s: ConfigSource): string {
  return s.url.origin + s.url.pathname.replace(/\/$/, "");
}

/** GET <primary>/api/config: the configuration text and its version. Throws saying why not. */
export function fetchConfig(s: ConfigSource): Promise<Fetched> {
  const target = new URL(`${s.url.pathname.replace(/\/$/, "")}/api/config`, s.url);
  const headers: Record<string, string> = { accept: "application/json" };
  if (s.auth !== null) headers.authorization = `Basic ${Buffer.from(s.auth).toString("base64")}`;
  const client = target.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    // A fresh connection per poll: nothing is held open to the primary between polls.
    const req = client.get(target, { headers, timeout: REQUEST_TIMEOUT_MS, agent: false, ...(s.ca ? { ca: s.ca } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_CONFIG_BYTES) {
          req.destroy(new Error(`the answer is larger than ${MAX_CONFIG_BYTES} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on("error", reject);
      res.on("end", () => {
        try {
          resolve(readAnswer(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`)));
    req.on("error", reject);
  });
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
