// Who is using the dashboard: GET /api/session at start (whether the server asks for credentials at
// all, and who the browser's session cookie belongs to), POST /api/session to sign in (the server sets
// an HttpOnly cookie; the password goes once and is kept nowhere), DELETE /api/session to sign out.
// `can(role)` is the one test every control uses: a control the principal's role cannot use is not
// shown (the server refuses it anyway, 403 forbidden_role).

import { computed, signal } from "@preact/signals";
import type { Role } from "../../src/registry/roles.js";
import { apiHeaders, authMessage, authState, onSignOut, refusedText, request, signOut } from "./api";

export type { Role };

/** Who made a request, as GET /api/session describes the caller. */
export interface Principal {
  kind: "anonymous" | "user" | "token" | "certificate";
  name: string;
  role: Role | null;
  via: "none" | "basic" | "session" | "token" | "certificate";
  scopes: string[] | null;
}

interface SessionTimes {
  expires_at_ms: number;
  idle_timeout_ms: number;
}

interface SessionAnswer {
  ok: true;
  auth_required: boolean;
  principal: Principal;
  session: SessionTimes | null;
}

interface SignedIn {
  ok: true;
  session: { user: string; role: Role; via: "session" } & SessionTimes;
}

/** Each role and its rank: every role may do what the ones below it may (src/registry/roles.ts). */
const RANK: Record<Role, number> = { metrics: 0, viewer: 1, operator: 2, admin: 3 };

/** The signed-in caller (the anonymous admin when the server asks for no credentials), or null before the first answer. */
export const principal = signal<Principal | null>(null);
/** True when the server asks for credentials: the header then shows who is signed in and "Sign out". */
export const authRequired = signal(false);
/** When the session ends at the latest, and after how long without a request; null without a session. */
export const sessionTimes = signal<SessionTimes | null>(null);

onSignOut(() => {
  principal.value = null;
  sessionTimes.value = null;
});

/**
 * The role the dashboard works with: the principal's, or viewer for one without a role (a scoped token
 * is not a dashboard case; the server decides route by route, the page shows only what a viewer sees).
 */
export const role = computed<Role | null>(() => {
  const p = principal.value;
  if (p === null) return null;
  return p.role ?? "viewer";
});

/** True when the signed-in role is `needed` or above it. */
export function can(needed: Role): boolean {
  const held = role.value;
  return held !== null && RANK[held] >= RANK[needed];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Asks the server who this browser is (GET /api/session): signed in, sign-in needed, or unreachable. */
export async function probe(): Promise<void> {
  let res: Response;
  try {
    res = await fetch("api/session", { headers: apiHeaders(), cache: "no-store", credentials: "same-origin" });
  } catch {
    authState.value = "unreachable";
    return;
  }
  if (res.status === 401) {
    let code = "unauthorized";
    let message = "";
    try {
      const body = (await res.json()) as { code?: unknown; message?: unknown };
      if (typeof body.code === "string") code = body.code;
      if (typeof body.message === "string") message = body.message;
    } catch {
      // Not the JSON error shape: a plain sign-in is needed.
    }
    // A browser that never signed in just sees the form; an ended session says why.
    signOut(code === "unauthorized" ? null : refusedText(code, message));
    return;
  }
  if (!res.ok) {
    authState.value = "unreachable";
    return;
  }
  const answer = (await res.json()) as SessionAnswer;
  principal.value = answer.principal;
  authRequired.value = answer.auth_required;
  sessionTimes.value = answer.session;
  authState.value = "ok";
}

/** The outcome of a sign-in: "ok", or what the form shows (and, for a throttled one, the seconds to wait). */
export type SignInResult = { ok: true } | { ok: false; message: string; retryAfterS: number | null };

/** Signs in with POST /api/session; the server's cookie then authenticates the tab. */
export async function signIn(username: string, password: string): Promise<SignInResult> {
  const res = await fetch("api/session", {
    method: "POST",
    headers: apiHeaders({ "content-type": "application/json" }),
    body: JSON.stringify({ username, password }),
    cache: "no-store",
    credentials: "same-origin",
  });
  let body: Record<string, unknown> = {};
  try {
    const parsed = (await res.json()) as unknown;
    if (parsed !== null && typeof parsed === "object") body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: the status speaks.
  }
  if (res.status === 429) {
    const header = Number(res.headers.get("retry-after"));
    const retry = typeof body.retry_after_s === "number" ? body.retry_after_s : Number.isFinite(header) && header > 0 ? header : null;
    return { ok: false, message: "Too many failed sign-ins.", retryAfterS: retry === null ? null : Math.ceil(retry) };
  }
  if (res.status === 401) return { ok: false, message: "Wrong user name or password.", retryAfterS: null };
  if (!res.ok) {
    const message = typeof body.message === "string" ? body.message : `HTTP ${res.status}`;
    return { ok: false, message: `The server refused the sign-in: ${message}${typeof body.code === "string" ? ` (${body.code})` : ""}`, retryAfterS: null };
  }
  const s = (body as unknown as SignedIn).session;
  authMessage.value = null;
  // The whole picture (auth required, the principal's kind) comes from GET /api/session.
  principal.value = { kind: "user", name: s.user, role: s.role, via: "session", scopes: null };
  authRequired.value = true;
  sessionTimes.value = { expires_at_ms: s.expires_at_ms, idle_timeout_ms: s.idle_timeout_ms };
  await probe();
  // The password was right, yet the next request came without the cookie.
  if (authState.value === "needed") return { ok: false, message: "The server accepted the sign-in, but this browser did not send its session cookie back (cookies blocked, or a Secure cookie over plain HTTP).", retryAfterS: null };
  return { ok: true };
}

/**
 * Ends the session on the server (DELETE /api/session clears the cookie) and forgets everything of it
 * here. Even when the server cannot be reached the tab shows the sign-in form: the cookie then ends at
 * its idle timeout.
 */
export async function signOutNow(): Promise<void> {
  try {
    await Promise.race([request("api/session", { method: "DELETE" }), sleep(5000)]);
  } catch {
    // A 401 (the session had ended already) or no answer: signed out here all the same.
  }
  signOut("Signed out.");
}
