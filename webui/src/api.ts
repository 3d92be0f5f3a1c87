// The dashboard's only way to the server: same-origin requests to the public management API,
// with the Basic credentials of this tab. Credentials live in sessionStorage (gone when the tab
// closes, never shared with other tabs, never in localStorage); a 401 anywhere signs the tab out.

import { batch, signal } from "@preact/signals";

const STORE_KEY = "sluice.auth";

function stored(): string | null {
  try {
    return sessionStorage.getItem(STORE_KEY);
  } catch {
    return null;
  }
}

/** The Authorization header value of this tab, or null when no credentials are known. */
export const authHeader = signal<string | null>(stored());
/** "checking" until the first probe answers; "needed" shows the sign-in form. */
export const authState = signal<"checking" | "needed" | "ok" | "unreachable">("checking");
/** Why the sign-in form is shown (a refused password, an expired session), or null. */
export const authMessage = signal<string | null>(null);
/** True once the server has asked for credentials: the header then offers "Sign out". */
export const authUsed = signal<boolean>(stored() !== null);

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

/** `Basic` + standard Base64 of the UTF-8 bytes of `user:password` (btoa alone cannot take non-Latin-1 text). */
export function basicHeader(user: string, password: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(`${user}:${password}`)) binary += String.fromCharCode(byte);
  return `Basic ${btoa(binary)}`;
}

function remember(header: string | null): void {
  authHeader.value = header;
  try {
    if (header === null) sessionStorage.removeItem(STORE_KEY);
    else sessionStorage.setItem(STORE_KEY, header);
  } catch {
    // Storage disabled: the credentials stay in memory for this page only.
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

/** Forgets the credentials and every module's state, and shows the sign-in form with `message`. */
export function signOut(message: string | null = null): void {
  batch(() => {
    remember(null);
    for (const reset of resets) reset();
    authMessage.value = message;
    authState.value = "needed";
  });
}

/**
 * Headers for an API request: `extra`, this tab's Authorization, and X-Requested-With, which asks the
 * server for a 401 without a Basic challenge (the browser would otherwise open its own password dialog).
 */
export function withAuth(extra?: HeadersInit): Headers {
  const headers = new Headers(extra);
  headers.set("x-requested-with", "XMLHttpRequest");
  if (authHeader.value !== null) headers.set("authorization", authHeader.value);
  return headers;
}

/** fetch() with this tab's credentials; a 401 signs the tab out and throws. */
export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, { ...init, headers: withAuth(init.headers), cache: "no-store" });
  if (res.status === 401) {
    authUsed.value = true;
    signOut(authHeader.value !== null ? "The server refused the stored credentials; sign in again." : null);
    throw new ApiFailure(401, "unauthorized", "sign-in needed", {});
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

/** Asks the server whether this tab may use the API (credentials needed or accepted). */
export async function probe(): Promise<void> {
  try {
    const res = await fetch("api/healthz", { headers: withAuth(), cache: "no-store" });
    if (res.status === 401) {
      authUsed.value = true;
      signOut(authHeader.value !== null ? "The server refused the stored credentials; sign in again." : null);
      return;
    }
    authState.value = "ok";
  } catch {
    authState.value = "unreachable";
  }
}

/** Tries a user name and password; true (and remembered for this tab) when the server accepts them. */
export async function signIn(user: string, password: string): Promise<boolean> {
  const header = basicHeader(user, password);
  const res = await fetch("api/healthz", { headers: { authorization: header, "x-requested-with": "XMLHttpRequest" }, cache: "no-store" });
  if (res.status === 401) {
    authMessage.value = "Wrong user name or password.";
    return false;
  }
  remember(header);
  authUsed.value = true;
  authMessage.value = null;
  authState.value = "ok";
  return true;
}
