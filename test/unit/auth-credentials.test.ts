// API tokens and dashboard sessions (src/api/auth/credentials.ts) on an injected clock: a token's
// secret checks until it expires or is revoked, each refusal with its code; a session ends after its
// idle time or its absolute lifetime; the state file (serialize → load) keeps hashes only, never a
// secret or a session id, and a second process reading it takes the same tokens and sessions; the
// least recently used session goes when MAX_SESSIONS are open.
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { Credentials, type SessionLifetimes, type TokenRecord } from "../../src/api/auth/credentials.js";

const dir = mkdtempSync(join(tmpdir(), "auth-credentials-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const T0 = 1_700_000_000_000;
const DAY = 86_400_000;
const LIFETIMES: SessionLifetimes = { idleMs: 60_000, absoluteMs: 300_000 };
const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

function credentials(): { c: Credentials; clock: { now: number } } {
  const clock = { now: T0 };
  return { c: new Credentials(() => clock.now), clock };
}

const FIELDS: Pick<TokenRecord, "name" | "role" | "scopes" | "expires_at_ms" | "created_by"> = { name: "prometheus", role: "metrics", scopes: null, expires_at_ms: null, created_by: "admin" };

describe("tokens", () => {
  test("a new token: slc_<id>_<secret>, listed without its hash; the secret checks and sets its last use", () => {
    const { c, clock } = credentials();
    const { token, secret } = c.createToken(FIELDS);
    const m = /^slc_([A-Za-z0-9_-]{12})_([A-Za-z0-9_-]{43})$/.exec(secret);
    expect(m?.[1]).toBe(token.id);
    expect(token).toEqual({ id: token.id, name: "prometheus", role: "metrics", scopes: null, created_at_ms: T0, expires_at_ms: null, last_used_at_ms: null, created_by: "admin" });
    expect(c.activeTokens()).toEqual([token]);
    expect(c.hasActiveName("prometheus")).toBe(true);
    clock.now += 5000;
    const check = c.checkToken(secret);
    expect(check.ok).toBe(true);
    expect(check.ok && check.token.hash).toBe(sha256(secret));
    expect(c.activeTokens()[0]?.last_used_at_ms).toBe(T0 + 5000);
    // Ids differ token to token.
    const other = c.createToken({ ...FIELDS, name: "widget", role: null, scopes: ["GET /api/stats"] });
    expect(other.token.id).not.toBe(token.id);
    expect(c.activeTokens().map((t) => t.name)).toEqual(["prometheus", "widget"]);
  });

  test("a wrong secret of a known id, an unknown id, a malformed token: invalid_token, and no last use set", () => {
    const { c } = credentials();
    const { token, secret } = c.createToken(FIELDS);
    const flipped = `${secret.slice(0, -1)}${secret.endsWith("A") ? "B" : "A"}`;
    const unknown = `slc_${"x".repeat(12)}_${secret.slice(-43)}`;
    for (const presented of [flipped, unknown, secret.slice(0, -1), `${secret}x`, "", "slc__", secret.replace("slc_", "SLC_"), ` ${secret}`]) {
      expect(c.checkToken(presented), JSON.stringify(presented)).toEqual({ ok: false, code: "invalid_token" });
    }
    expect(c.activeTokens()[0]).toMatchObject({ id: token.id, last_used_at_ms: null });
  });

  test("a token stops checking the moment it expires: token_expired", () => {
    const { c, clock } = credentials();
    const { secret } = c.createToken({ ...FIELDS, expires_at_ms: T0 + 1000 });
    clock.now = T0 + 999;
    expect(c.checkToken(secret).ok).toBe(true);
    clock.now = T0 + 1000;
    expect(c.checkToken(secret)).toEqual({ ok: false, code: "token_expired" });
    // Still listed (an expired token is not revoked) with the last use that worked.
    expect(c.activeTokens()[0]?.last_used_at_ms).toBe(T0 + 999);
  });

  test("a revoked token: token_revoked at once, no longer listed, its name free again; revoking twice or an unknown id: null", () => {
    const { c, clock } = credentials();
    const { token, secret } = c.createToken(FIELDS);
    clock.now += 10;
    expect(c.revokeToken(token.id)).toMatchObject({ id: token.id, revoked_at_ms: T0 + 10 });
    expect(c.checkToken(secret)).toEqual({ ok: false, code: "token_revoked" });
    expect(c.activeTokens()).toEqual([]);
    expect(c.hasActiveName("prometheus")).toBe(false);
    expect(c.revokeToken(token.id)).toBeNull();
    expect(c.revokeToken("nosuchtoken1")).toBeNull();
    // Revoked beats expired: the code says what happened first to the operator.
    const later = c.createToken({ ...FIELDS, expires_at_ms: T0 + 20 });
    c.revokeToken(later.token.id);
    clock.now = T0 + 30;
    expect(c.checkToken(later.secret)).toEqual({ ok: false, code: "token_revoked" });
  });
});

describe("sessions", () => {
  test("a session lives while it is used within its idle time; past it, session_expired once, then invalid_session", () => {
    const { c, clock } = credentials();
    const { id, session } = c.startSession("alice");
    expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).toEqual({ hash: sha256(id), user: "alice", created_at_ms: T0, last_seen_at_ms: T0 });
    expect(c.sessionExpiry(session, LIFETIMES)).toBe(T0 + 60_000);
    clock.now += 60_000;
    // Exactly the idle time: still alive, and seen now.
    expect(c.checkSession(id, LIFETIMES)).toMatchObject({ ok: true, session: { last_seen_at_ms: T0 + 60_000 } });
    expect(c.sessionExpiry(session, LIFETIMES)).toBe(T0 + 120_000);
    clock.now += 60_001;
    expect(c.checkSession(id, LIFETIMES)).toEqual({ ok: false, code: "session_expired" });
    expect(c.checkSession(id, LIFETIMES)).toEqual({ ok: false, code: "invalid_session" });
  });

  test("a session used all the time still ends at its absolute lifetime", () => {
    const { c, clock } = credentials();
    const { id, session } = c.startSession("alice");
    for (let t = 50_000; t <= 300_000; t += 50_000) {
      clock.now = T0 + t;
      expect(c.checkSession(id, LIFETIMES).ok, String(t)).toBe(true);
    }
    expect(c.sessionExpiry(session, LIFETIMES)).toBe(T0 + 300_000);
    clock.now = T0 + 300_001;
    expect(c.checkSession(id, LIFETIMES)).toEqual({ ok: false, code: "session_expired" });
  });

  test("an id not of ours, or of another session, is invalid_session; signing out ends one session, a removed user's end too", () => {
    const { c } = credentials();
    const a = c.startSession("alice");
    const b = c.startSession("bob");
    const a2 = c.startSession("alice");
    for (const id of ["", "x", a.id.slice(1), `${a.id}=`, a.session.hash]) expect(c.checkSession(id, LIFETIMES), id).toEqual({ ok: false, code: "invalid_session" });
    expect(c.endSession(a.session.hash)).toBe(true);
    expect(c.endSession(a.session.hash)).toBe(false);
    expect(c.checkSession(a.id, LIFETIMES).ok).toBe(false);
    expect(c.checkSession(a2.id, LIFETIMES).ok).toBe(true);
    expect(c.endSessionsExcept(new Set(["alice"]))).toEqual([b.session.hash]);
    expect(c.checkSession(b.id, LIFETIMES)).toEqual({ ok: false, code: "invalid_session" });
    expect(c.checkSession(a2.id, LIFETIMES).ok).toBe(true);
  });

  test("past MAX_SESSIONS (1000) a new session ends the least recently used one", () => {
    const { c, clock } = credentials();
    const ids: string[] = [];
    for (let i = 0; i < 1000; i++) {
      clock.now = T0 + i;
      ids.push(c.startSession(`user${i}`).id);
    }
    // The first is used again: the second is now the least recently used.
    clock.now = T0 + 5000;
    expect(c.checkSession(ids[0] ?? "", LIFETIMES).ok).toBe(true);
    const newest = c.startSession("late").id;
    expect(c.checkSession(ids[1] ?? "", LIFETIMES)).toEqual({ ok: false, code: "invalid_session" });
    for (const id of [ids[0], ids[2], ids[999], newest]) expect(c.checkSession(id ?? "", LIFETIMES).ok).toBe(true);
    const file = join(dir, "many.json");
    writeFileSync(file, c.serialize());
    expect((JSON.parse(readFileSync(file, "utf8")) as { sessions: unknown[] }).sessions).toHaveLength(1000);
  });
});

describe("the state file", () => {
  test("serialize → load: tokens and sessions come back, checked by their secrets; the file holds hashes, never a secret or a session id", () => {
    const { c, clock } = credentials();
    const kept = c.createToken({ ...FIELDS, expires_at_ms: T0 + 30 * DAY });
    const scoped = c.createToken({ ...FIELDS, name: "widget", role: null, scopes: ["GET /api/stats", "GET /api/metrics"] });
    const revoked = c.createToken({ ...FIELDS, name: "old" });
    c.revokeToken(revoked.token.id);
    clock.now += 1000;
    expect(c.checkToken(kept.secret).ok).toBe(true);
    const session = c.startSession("alice");
    const file = join(dir, "auth.json");
    const text = c.serialize();
    writeFileSync(file, text, { mode: 0o600 });
    for (const secret of [kept.secret, scoped.secret, revoked.secret, session.id]) {
      expect(text).not.toContain(secret);
      // Not even the random part alone.
      expect(text).not.toContain(secret.slice(-43));
    }
    for (const hash of [sha256(kept.secret), sha256(scoped.secret), sha256(revoked.secret), sha256(session.id)]) expect(text).toContain(hash);
    const data = JSON.parse(text) as { version: number; tokens: TokenRecord[]; sessions: unknown[] };
    expect(data.version).toBe(1);
    expect(Object.keys(data.tokens[0] ?? {}).sort()).toEqual(["created_at_ms", "created_by", "expires_at_ms", "hash", "id", "last_used_at_ms", "name", "revoked_at_ms", "role", "scopes"]);

    const next = credentials();
    next.clock.now = clock.now + 10;
    next.c.load(file);
    expect(next.c.activeTokens()).toEqual(c.activeTokens());
    expect(next.c.activeTokens().find((t) => t.name === "prometheus")?.last_used_at_ms).toBe(T0 + 1000);
    expect(next.c.checkToken(kept.secret).ok).toBe(true);
    expect(next.c.checkToken(scoped.secret)).toMatchObject({ ok: true, token: { role: null, scopes: ["GET /api/stats", "GET /api/metrics"] } });
    expect(next.c.checkToken(revoked.secret)).toEqual({ ok: false, code: "token_revoked" });
    expect(next.c.checkSession(session.id, LIFETIMES)).toMatchObject({ ok: true, session: { user: "alice", created_at_ms: T0 + 1000 } });
    // The file read and serialized again by another process: the same content.
    const reread = credentials();
    reread.clock.now = clock.now;
    reread.c.load(file);
    expect(reread.c.serialize()).toBe(text);
  });

  test("a revoked token is remembered 30 days (token_revoked), then left out of the file", () => {
    const { c, clock } = credentials();
    const { token, secret } = c.createToken(FIELDS);
    c.revokeToken(token.id);
    clock.now = T0 + 30 * DAY - 1;
    expect((JSON.parse(c.serialize()) as { tokens: unknown[] }).tokens).toHaveLength(1);
    clock.now = T0 + 30 * DAY;
    const file = join(dir, "old-revoked.json");
    writeFileSync(file, c.serialize());
    expect((JSON.parse(readFileSync(file, "utf8")) as { tokens: unknown[] }).tokens).toEqual([]);
    const next = new Credentials(() => clock.now);
    next.load(file);
    expect(next.checkToken(secret)).toEqual({ ok: false, code: "invalid_token" });
  });

  test("a missing file is an empty start; a file not of ours is refused with its name; entries that are not tokens or sessions are skipped", () => {
    const { c } = credentials();
    c.load(join(dir, "missing.json"));
    expect(c.activeTokens()).toEqual([]);
    const foreign = join(dir, "foreign.json");
    writeFileSync(foreign, JSON.stringify({ version: 2, tokens: [], sessions: [] }));
    expect(() => c.load(foreign)).toThrow(`${foreign} is not a Sluice auth state file (version 1)`);
    writeFileSync(foreign, "not json");
    expect(() => c.load(foreign)).toThrow();
    const mixed = join(dir, "mixed.json");
    const good = credentials().c.createToken(FIELDS);
    const record = { ...good.token, hash: sha256(good.secret), revoked_at_ms: null };
    writeFileSync(mixed, JSON.stringify({ version: 1, tokens: [record, { ...record, id: "x", role: "root" }, { name: "no id" }], sessions: [{ user: "no hash" }] }));
    c.load(mixed);
    expect(c.activeTokens().map((t) => t.id)).toEqual([good.token.id]);
    expect(c.checkToken(good.secret).ok).toBe(true);
  });
});
