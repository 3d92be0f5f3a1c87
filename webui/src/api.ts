// The dashboard's only way to the server: same-origin requests to the public management API. The
// dashboard signs in with POST /api/session (session.ts) and from then on the HttpOnly session cookie
// authenticates every request, fetch() sending it same-origin: this tab keeps no password and no token
// (none in memory, sessionStorage or localStorage). A 401 anywhere shows the sign-in form with its reason.

import { batch, signal } from "@preact/signals";

/** "checking" until the first probe answers; "needed" shows the sign-in form. */
export const authState = signal<"checking" | "needed" | "ok" | "unreachable">("checking");
/** Why the sign-in form is shown (a refused password, an expired session), or null. */
export const authMessage = signal<string | null>(null);

/** An error answer of the API: its status and the `code`/`message` of the one error shape. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
    this.name = "ApiFailure";
  }
}

/** What each module with state of its own resets at sign-out (see onSignOut). */
const resets = new Set<() => void>();

/**
 * Registers `reset`, run at every sign-out (the button, or a 401): a module that keeps state beyond
 * one page (a draft, a token, a cached list, a connection) registers here once, so nothing of one
 * session shows in the next, which may be someone else's.
 */
export function onSignOut(reset: () => void): void {
  resets.add(reset);
}

/** Forgets every module's state (the session's principal included) and shows the sign-in form with `message`. */
export function signOut(message: string | null = null): void {
  batch(() => {
    for (const reset of resets) reset();
    authMessage.value = message;
    authState.value = "needed";
  });
}

/**
 * Headers for an API request: `extra` and X-Requested-With, which asks the server for a 401 without a
 * Basic challenge (the browser would otherwise open its own password dialog). The session cookie goes
 * along by itself (same origin).
 */
export function apiHeaders(extra?: HeadersInit): Headers {
  const headers = new Headers(extra);
  headers.set("x-requested-with", "XMLHttpRequest");
  return headers;
}

/** The text the sign-in form shows for a 401 answer's code. */
export function refusedText(code: string, message: string): string {
  switch (code) {
    case "session_expired":
      return "Your session has expired; sign in again.";
    case "invalid_session":
      return "Your session is no longer valid (signed out elsewhere, or the server restarted); sign in again.";
    case "unauthorized":
      return "Sign-in needed: the server did not accept this browser's session.";
    default:
      return `The server refused this session: ${message} (${code}); sign in again.`;
  }
}

/** The `code` and `message` of an error answer's body (the one error shape), or the status alone. */
async function errorOf(res: Response): Promise<{ code: string; message: string; body: Record<string, unknown> }> {
  let body: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(await res.clone().text()) as unknown;
    if (parsed !== null && typeof parsed === "object") body = parsed as Record<string, unknown>;
  } catch {
    // Not the JSON error shape: the status speaks.
  }
  return {
    code: typeof body.code === "string" ? body.code : `http_${res.status}`,
    message: typeof body.message === "string" ? body.message : res.statusText || `HTTP ${res.status}`,
    body,
  };
}

/** fetch() with the session cookie; a 401 shows the sign-in form with its reason and throws. */
export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, { ...init, headers: apiHeaders(init.headers), cache: "no-store", credentials: "same-origin" });
  if (res.status === 401) {
    const e = await errorOf(res);
    signOut(refusedText(e.code, e.message));
    throw new ApiFailure(401, e.code, e.message, e.body);
  }
  return res;
}

/** The JSON answer of an API route; an error answer becomes an ApiFailure with the server's code and message. */
export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await request(path, init);
  const text = await res.text();
  let body: unknown;
  try {
    body = text === "" ? null : (JSON.parse(text) as unknown);
  } catch {
    body = null;
  }
  if (!res.ok) {
    const b = (body !== null && typeof body === "object" ? body : {}) as Record<string, unknown>;
    const code = typeof b.code === "string" ? b.code : `http_${res.status}`;
    const message = typeof b.message === "string" ? b.message : text.trim() || res.statusText || `HTTP ${res.status}`;
    throw new ApiFailure(res.status, code, message, b);
  }
  return body as T;
}

/** A JSON request (POST/PUT/DELETE) with an optional JSON body. */
export function send<T>(method: "POST" | "PUT" | "DELETE", path: string, body?: unknown): Promise<T> {
  return api<T>(path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** The path of a plugin route: `api/plugins/<tag>/<sub>` with the tag encoded. */
export const pluginPath = (tag: string, sub: string): string => `api/plugins/${encodeURIComponent(tag)}${sub ? `/${sub}` : ""}`;

/** Text for an error of any kind, for showing to the operator. */
export function errorText(err: unknown): string {
  if (err instanceof ApiFailure) return `${err.message} (${err.code})`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * Text for a refused or failed request that names the HTTP status and code, so a 409 (busy), 503
 * (unavailable) or 507 (full) reads as a refusal rather than as a fault: "Refused (409 cron_job_already_running): …".
 */
export function refusalText(err: unknown): string {
  // 503 (unavailable) and 507 (a bounded store is full) are refusals too, not faults.
  if (err instanceof ApiFailure) return `${err.status >= 500 && err.status !== 503 && err.status !== 507 ? "Failed" : "Refused"} (${err.status} ${err.code}): ${err.message}`;
  return errorText(err);
}
