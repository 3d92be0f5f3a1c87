// API tokens and dashboard sessions, held in memory for the checks (a request never waits on a file)
// and kept in one state file (api.http.auth.state_file, mode 0600) so both survive a restart. Only
// hashes are kept: a token's secret is shown once when it is made; a session id lives in the cookie.
//   token   slc_<id>_<secret>   id: 12 base64url characters (listed, revoked by), secret: 32 random bytes
//   session <32 random bytes, base64url>

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Role } from "../../registry/roles.js";
import { isRole } from "../../registry/roles.js";

export interface TokenRecord {
  id: string;
  name: string;
  /** The token's role, or null when it is limited to `scopes` instead. */
  role: Role | null;
  scopes: string[] | null;
  /** sha256 (hex) of the whole token. */
  hash: string;
  created_at_ms: number;
  created_by: string;
  expires_at_ms: number | null;
  last_used_at_ms: number | null;
  revoked_at_ms: number | null;
}

export type TokenView = Omit<TokenRecord, "hash" | "revoked_at_ms">;

export interface SessionRecord {
  /** sha256 (hex) of the session id. */
  hash: string;
  user: string;
  created_at_ms: number;
  last_seen_at_ms: number;
}

export interface SessionLifetimes {
  idleMs: number;
  absoluteMs: number;
}

/** Tokens kept (active ones); revoked ones are remembered 30 days to answer token_revoked. */
export const MAX_TOKENS = 256;
const REVOKED_KEPT_MS = 30 * 86_400_000;
/** Sessions kept; a new one past this ends the least recently used. */
const MAX_SESSIONS = 1000;

const TOKEN = /^slc_([A-Za-z0-9_-]{12})_([A-Za-z0-9_-]{43})$/;
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");
const sameHash = (a: string, b: string): boolean => a.length === b.length && timingSafeEqual(Buffer.from(a, "hex"), Buffer.from(b, "hex"));
const randomId = (bytes: number): string => randomBytes(bytes).toString("base64url");

/** A refused token names itself only when its secret was right (revoked or expired): never for a guess. */
export type TokenCheck = { ok: true; token: TokenRecord } | { ok: false; code: "invalid_token" } | { ok: false; code: "token_expired" | "token_revoked"; name: string };
export type SessionCheck = { ok: true; session: SessionRecord } | { ok: false; code: "invalid_session" | "session_expired" };

interface StateFile {
  version: 1;
  tokens: TokenRecord[];
  sessions: SessionRecord[];
}

export class Credentials {
  private readonly tokens = new Map<string, TokenRecord>();
  private readonly sessions = new Map<string, SessionRecord>();
  /** Compared against when a token id is unknown, so unknown and wrong cost the same. */
  private readonly dummy = sha256(randomId(32));

  constructor(private readonly now: () => number) {}

  /** Reads the state file (missing: empty). Throws with a readable message when it is not one of ours. */
  load(path: string): void {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    const data = JSON.parse(text) as Partial<StateFile>;
    if (data.version !== 1 || !Array.isArray(data.tokens) || !Array.isArray(data.sessions)) throw new Error(`${path} is not a Sluice auth state file (version 1)`);
    for (const t of data.tokens) if (typeof t.id === "string" && typeof t.hash === "string" && (t.role === null || isRole(t.role))) this.tokens.set(t.id, t);
    for (const s of data.sessions) if (typeof s.hash === "string" && typeof s.user === "string") this.sessions.set(s.hash, s);
  }

  /** The file's content now (revocations older than 30 days left out; a session stays until it is checked expired, ended or evicted). */
  serialize(): string {
    const t = this.now();
    const tokens = [...this.tokens.values()].filter((k) => k.revoked_at_ms === null || t - k.revoked_at_ms < REVOKED_KEPT_MS);
    const sessions = [...this.sessions.values()];
    return `${JSON.stringify({ version: 1, tokens, sessions } satisfies StateFile, null, 1)}\n`;
  }

  // ---- tokens -------------------------------------------------------------------------------

  activeTokens(): TokenView[] {
    return [...this.tokens.values()].filter((k) => k.revoked_at_ms === null).map(view);
  }

  /** The token with this id, active or revoked (for the audit line of a revocation). */
  tokenById(id: string): TokenView | null {
    const record = this.tokens.get(id);
    return record ? view(record) : null;
  }

  hasActiveName(name: string): boolean {
    return [...this.tokens.values()].some((k) => k.revoked_at_ms === null && k.name === name);
  }

  createToken(fields: Pick<TokenRecord, "name" | "role" | "scopes" | "expires_at_ms" | "created_by">): { token: TokenView; secret: string } {
    let id = randomId(9);
    while (this.tokens.has(id)) id = randomId(9);
    const secret = `slc_${id}_${randomId(32)}`;
    const record: TokenRecord = { id, ...fields, hash: sha256(secret), created_at_ms: this.now(), last_used_at_ms: null, revoked_at_ms: null };
    this.tokens.set(id, record);
    return { token: view(record), secret };
  }

  /** The revoked token, or null when no active token has this id. */
  revokeToken(id: string): TokenRecord | null {
    const record = this.tokens.get(id);
    if (!record || record.revoked_at_ms !== null) return null;
    record.revoked_at_ms = this.now();
    return record;
  }

  /** Checks a presented token; a good one has its last use set to now. */
  checkToken(presented: string): TokenCheck {
    const m = TOKEN.exec(presented);
    const record = m ? this.tokens.get(m[1] ?? "") : undefined;
    const matches = sameHash(sha256(presented), record?.hash ?? this.dummy) && record !== undefined;
    if (!record || !matches) return { ok: false, code: "invalid_token" };
    if (record.revoked_at_ms !== null) return { ok: false, code: "token_revoked", name: record.name };
    const t = this.now();
    if (record.expires_at_ms !== null && record.expires_at_ms <= t) return { ok: false, code: "token_expired", name: record.name };
    record.last_used_at_ms = t;
    return { ok: true, token: record };
  }

  // ---- sessions -----------------------------------------------------------------------------

  /** A new session for `user`; the id goes into the cookie and nowhere else. */
  startSession(user: string): { id: string; session: SessionRecord } {
    if (this.sessions.size >= MAX_SESSIONS) {
      const oldest = [...this.sessions.values()].sort((a, b) => a.last_seen_at_ms - b.last_seen_at_ms)[0];
      if (oldest) this.sessions.delete(oldest.hash);
    }
    const id = randomId(32);
    const t = this.now();
    const session: SessionRecord = { hash: sha256(id), user, created_at_ms: t, last_seen_at_ms: t };
    this.sessions.set(session.hash, session);
    return { id, session };
  }

  /** Checks a cookie's session id; a live one is seen now (its idle time starts again). */
  checkSession(id: string, lifetimes: SessionLifetimes): SessionCheck {
    const session = SESSION_ID.test(id) ? this.sessions.get(sha256(id)) : undefined;
    if (!session) return { ok: false, code: "invalid_session" };
    const t = this.now();
    if (t - session.last_seen_at_ms > lifetimes.idleMs || t - session.created_at_ms > lifetimes.absoluteMs) {
      this.sessions.delete(session.hash);
      return { ok: false, code: "session_expired" };
    }
    session.last_seen_at_ms = t;
    return { ok: true, session };
  }

  endSession(hash: string): boolean {
    return this.sessions.delete(hash);
  }

  /** Ends every session of users no longer configured; their hashes. */
  endSessionsExcept(users: ReadonlySet<string>): string[] {
    const ended: string[] = [];
    for (const s of this.sessions.values()) {
      if (users.has(s.user)) continue;
      this.sessions.delete(s.hash);
      ended.push(s.hash);
    }
    return ended;
  }

  /** When this session ends unless it is used again. */
  sessionExpiry(session: SessionRecord, lifetimes: SessionLifetimes): number {
    return Math.min(session.last_seen_at_ms + lifetimes.idleMs, session.created_at_ms + lifetimes.absoluteMs);
  }
}

function view(record: TokenRecord): TokenView {
  const { hash: _hash, revoked_at_ms: _revoked, ...rest } = record;
  return rest;
}
