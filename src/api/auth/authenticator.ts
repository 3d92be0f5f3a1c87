// Who is asking: the credentials of one API request — a Basic user, a Bearer token, the dashboard's
// session cookie, a verified client certificate — become a Principal with a role, or a refusal with
// its code. Password checks run off the event loop (passwords.ts) and are remembered for a few
// minutes per exact pair (keyed by an HMAC with a key of this process), so a script sending Basic
// on every request does not pay scrypt each time. Failures feed the sign-in throttle.

import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { Role } from "../../registry/roles.js";
import type { Credentials, SessionRecord, TokenRecord } from "./credentials.js";
import { dummyHash, PasswordPool, PasswordPoolFull } from "./passwords.js";
import type { AuthSettings, UserEntry } from "./settings.js";
import { LoginThrottle, type Lockout } from "./throttle.js";
import type { AuditVia } from "../audit/entry.js";

export interface Principal {
  kind: "anonymous" | "user" | "token" | "certificate";
  name: string;
  /** null: a token limited to route scopes. */
  role: Role | null;
  via: AuditVia;
  scopes: readonly string[] | null;
  /** What revokes this request's open streams: `token:<id>`, `session:<hash>`, `user:<name>`. */
  keys: readonly string[];
  session?: SessionRecord;
  token?: TokenRecord;
}

export type AuthCode = "unauthorized" | "invalid_token" | "token_expired" | "token_revoked" | "invalid_session" | "session_expired" | "credentials_too_large" | "too_many_attempts" | "auth_busy";

export interface AuthRefusal {
  code: AuthCode;
  message: string;
  /** The name the request tried (a Basic user), for the audit trail; never a secret. */
  attempted: string | null;
  via: AuditVia;
  retryAfterMs?: number;
  /** Answer with a Basic challenge (WWW-Authenticate). */
  challenge: boolean;
}

export interface PresentedCredentials {
  authorization: string | undefined;
  /** The value of this listener's session cookie, if sent. */
  sessionId: string | undefined;
  address: string;
  /** TLS verified a client certificate: its subject's CN (or "client certificate"). */
  certificate: string | null;
}

export interface AuthCounters {
  failed(via: AuditVia): void;
  throttled(by: Lockout["by"]): void;
}

/** Longest Authorization header looked at; longer is credentials_too_large. */
export const MAX_AUTHORIZATION = 4096;
const MAX_USER = 128;
export const MAX_PASSWORD = 1024;
/** How long a checked user/password pair is taken without scrypt again. */
const VERIFIED_FOR_MS = 5 * 60_000;
const VERIFIED_MAX = 256;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export const ANONYMOUS_ADMIN: Principal = { kind: "anonymous", name: "anonymous", role: "admin", via: "none", scopes: null, keys: [] };

export const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

const refusal = (code: AuthCode, message: string, via: AuditVia, extra: Partial<AuthRefusal> = {}): AuthRefusal => ({ code, message, via, attempted: null, challenge: false, ...extra });

function decodeBasic(encoded: string): { user: string; password: string } | null {
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) return null;
  const text = Buffer.from(encoded, "base64").toString("utf8");
  const colon = text.indexOf(":");
  return colon < 0 ? null : { user: text.slice(0, colon), password: text.slice(colon + 1) };
}

export class Authenticator {
  readonly throttle: LoginThrottle;
  private readonly pool = new PasswordPool();
  private readonly dummy = dummyHash();
  private readonly hmacKey = randomBytes(32);
  private readonly verified = new Map<string, { user: string; until: number }>();

  constructor(
    private settings: AuthSettings,
    readonly credentials: Credentials,
    private readonly now: () => number,
    private readonly counters: AuthCounters,
    /** Last-used times changed (written later). */
    private readonly touched: () => void,
  ) {
    this.throttle = new LoginThrottle(settings.throttle, now);
  }

  get current(): AuthSettings {
    return this.settings;
  }

  /** A reloaded api.http.auth: users and lifetimes change at once; checked pairs are checked again. */
  update(settings: AuthSettings): void {
    this.settings = settings;
    this.verified.clear();
  }

  /** The role of a configured user now (null: no such user). */
  roleOf(user: string): Role | null {
    return this.settings.users.get(user)?.role ?? null;
  }

  async authenticate(c: PresentedCredentials): Promise<Principal | AuthRefusal> {
    if (c.authorization !== undefined) {
      if (c.authorization.length > MAX_AUTHORIZATION) return this.fail(c.address, refusal("credentials_too_large", `the Authorization header is longer than ${MAX_AUTHORIZATION} bytes`, "none"));
      const space = c.authorization.indexOf(" ");
      const scheme = (space < 0 ? c.authorization : c.authorization.slice(0, space)).toLowerCase();
      const rest = space < 0 ? "" : c.authorization.slice(space + 1).trim();
      if (scheme === "bearer") return this.bearer(rest, c.address);
      // Without users, a Basic header is ignored as it always was (an open API stays open).
      if (scheme === "basic" && this.settings.users.size > 0) return this.basic(rest, c.address);
      if (this.settings.users.size > 0) return this.fail(c.address, refusal("unauthorized", "missing or wrong credentials", "basic", { challenge: true }));
    }
    if (c.sessionId !== undefined) {
      const found = this.session(c.sessionId);
      // A stale cookie on an open API is no reason to refuse.
      if ("kind" in found || this.settings.required) return found;
    }
    if (this.settings.certificateOnly && c.certificate !== null) {
      return { kind: "certificate", name: c.certificate, role: "admin", via: "certificate", scopes: null, keys: [] };
    }
    if (!this.settings.required) return ANONYMOUS_ADMIN;
    return refusal("unauthorized", "missing or wrong credentials", "none", { challenge: true });
  }

  /** Checks a user name and password (Basic, or POST /api/session); the user's name and role, or a refusal. */
  async checkPassword(user: string, password: string, address: string, via: AuditVia): Promise<{ user: string; role: Role } | AuthRefusal> {
    const attempted = user.slice(0, MAX_USER);
    if (user.length > MAX_USER || password.length > MAX_PASSWORD) return this.fail(address, refusal("credentials_too_large", `a user name is at most ${MAX_USER} characters and a password at most ${MAX_PASSWORD}`, via, { attempted }), attempted);
    const lock = this.throttle.locked(address, user);
    if (lock) return this.locked(lock, via, attempted);
    const key = createHmac("sha256", this.hmacKey).update(`${user}\0${password}`).digest("base64");
    const remembered = this.verified.get(key);
    const entry = this.settings.users.get(user);
    if (remembered && remembered.until > this.now() && entry) {
      this.throttle.succeeded(address);
      return { user, role: entry.role };
    }
    let ok: boolean;
    try {
      ok = await this.verify(entry, password);
    } catch (err) {
      if (err instanceof PasswordPoolFull) return refusal("auth_busy", "too many sign-ins are being checked; try again in a second", via, { retryAfterMs: 1000, attempted });
      throw err;
    }
    if (!ok || !entry) return this.fail(address, refusal("unauthorized", "missing or wrong credentials", via, { attempted, challenge: via === "basic" }), user);
    this.throttle.succeeded(address);
    if (this.verified.size >= VERIFIED_MAX) this.verified.delete(this.verified.keys().next().value as string);
    this.verified.set(key, { user, until: this.now() + VERIFIED_FOR_MS });
    return { user, role: entry.role };
  }

  private async verify(entry: UserEntry | undefined, password: string): Promise<boolean> {
    if (entry?.plain) return timingSafeEqual(sha256(password), entry.plain);
    // An unknown user costs a full check against a hash nobody has: the time says nothing about who exists.
    const ok = await this.pool.verify(entry?.hash ?? this.dummy, password);
    return ok && entry !== undefined;
  }

  private async basic(encoded: string, address: string): Promise<Principal | AuthRefusal> {
    const pair = /^[^ ]+$/.test(encoded) ? decodeBasic(encoded) : null;
    if (!pair) return this.fail(address, refusal("unauthorized", "missing or wrong credentials", "basic", { challenge: true }));
    const checked = await this.checkPassword(pair.user, pair.password, address, "basic");
    if ("code" in checked) return { ...checked, challenge: checked.code === "unauthorized" };
    return { kind: "user", name: checked.user, role: checked.role, via: "basic", scopes: null, keys: [`user:${checked.user}`] };
  }

  private bearer(presented: string, address: string): Principal | AuthRefusal {
    const lock = this.throttle.locked(address);
    if (lock) return this.locked(lock, "token", null);
    const checked = this.credentials.checkToken(presented);
    if (!checked.ok) {
      const messages = { invalid_token: "the token is not one this server issued", token_expired: "the token has expired", token_revoked: "the token was revoked" } as const;
      return this.fail(address, refusal(checked.code, messages[checked.code], "token", { attempted: "name" in checked ? checked.name : null }));
    }
    this.touched();
    const t = checked.token;
    return { kind: "token", name: t.name, role: t.role, via: "token", scopes: t.scopes, keys: [`token:${t.id}`], token: t };
  }

  private session(id: string): Principal | AuthRefusal {
    const checked = this.credentials.checkSession(id, this.settings.sessions);
    if (!checked.ok) {
      const message = checked.code === "session_expired" ? "the session has expired: sign in again" : "no such session here (signed out, or from another listener): sign in again";
      return refusal(checked.code, message, "session");
    }
    const s = checked.session;
    const role = this.roleOf(s.user);
    if (role === null) {
      this.credentials.endSession(s.hash);
      return refusal("invalid_session", `user '${s.user}' is no longer configured`, "session");
    }
    this.touched();
    return { kind: "user", name: s.user, role, via: "session", scopes: null, keys: [`session:${s.hash}`, `user:${s.user}`], session: s };
  }

  private fail(address: string, r: AuthRefusal, user?: string): AuthRefusal {
    this.counters.failed(r.via);
    const lock = this.throttle.failed(address, user);
    if (lock) this.counters.throttled(lock.by);
    return r;
  }

  private locked(lock: Lockout, via: AuditVia, attempted: string | null): AuthRefusal {
    this.counters.throttled(lock.by);
    const seconds = Math.ceil(lock.retryAfterMs / 1000);
    const what = lock.by === "address" ? "from this address" : "for this user";
    return refusal("too_many_attempts", `too many failed sign-ins ${what}: try again in ${seconds} s`, via, { retryAfterMs: lock.retryAfterMs, attempted });
  }
}
