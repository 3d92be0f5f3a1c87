// The API's accounts: the authenticator, the tokens and sessions with the actor that writes them
// (machines/auth-state.machine.ts), the session cookie of this listener, and the open responses
// (event streams) of each credential, closed the moment it is revoked or signed out.

import { isAbsolute, resolve } from "node:path";
import { mkdirSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { createActor, fromPromise, type Actor } from "xstate";
import { authStateMachine } from "../../../machines/auth-state.machine.js";
import { ask } from "../../../actors/ask.js";
import { replaceFileAtomically } from "../../config/atomic-file.js";
import type { ApiConfig } from "../../config/schema.js";
import type { ApiHost } from "../host.js";
import { showActor } from "../routes/inspect.js";
import { Authenticator, sha256, type Principal } from "./authenticator.js";
import { Credentials } from "./credentials.js";
import { authSettings } from "./settings.js";

const MAX_TIMER_MS = 2 ** 31 - 1;
/** Last-used times and idle sessions are written at most this often. */
const TOUCH_DELAY_MS = 60_000;

export interface CookieOptions {
  secure: boolean;
}

export class AuthService {
  readonly authenticator: Authenticator;
  readonly credentials: Credentials;
  private readonly actor: Actor<typeof authStateMachine>;
  private readonly open = new Map<string, Set<ServerResponse>>();
  private statePath: string;
  /** Takes the actor off /api/actors. */
  private readonly hideActor: () => void;

  constructor(
    private readonly host: ApiHost,
    config: ApiConfig,
    private readonly port: () => number,
    private readonly cookie: CookieOptions,
  ) {
    const now = (): number => host.now();
    const settings = authSettings(config, sha256);
    this.credentials = new Credentials(now);
    this.statePath = this.resolve(settings.stateFile);
    try {
      this.credentials.load(this.statePath);
    } catch (err) {
      // Serving without the tokens is better than not serving; the file is left as it is until a change rewrites it.
      host.log.error({ target: "api", file: this.statePath, err: (err as Error).message }, "the auth state file could not be read; tokens and sessions start empty");
    }
    const failures = host.metrics.counter("api_auth_failures_total", "Failed authentications of API requests, by how the credentials came (basic, session, token)", ["via"]);
    const throttled = host.metrics.counter("api_auth_throttled_total", "API requests refused 429 by the sign-in throttle, by what is locked out (address, user)", ["by"]);
    this.authenticator = new Authenticator(settings, this.credentials, now, { failed: (via) => failures({ via }).value++, throttled: (by) => throttled({ by }).value++ }, () => this.touched());
    this.actor = createActor(
      authStateMachine.provide({
        actors: {
          write: fromPromise(async () => {
            mkdirSync(resolve(this.statePath, ".."), { recursive: true });
            await replaceFileAtomically(this.statePath, this.credentials.serialize(), "auth", { mode: 0o600 });
          }),
        },
      }),
      { input: { touchDelayMs: TOUCH_DELAY_MS }, systemId: "auth-state" },
    );
    this.actor.start();
    this.hideActor = showActor(host, this.actor);
  }

  private resolve(p: string): string {
    return isAbsolute(p) ? p : resolve(this.host.baseDir, p);
  }

  /** This listener's cookie: named for its port, so two listeners on one host keep their own. */
  cookieName(): string {
    return `sluice_session_${this.port()}`;
  }

  sessionCookie(id: string, maxAgeMs: number): string {
    return `${this.cookieName()}=${id}; Path=/api; HttpOnly; SameSite=Strict; Max-Age=${Math.floor(maxAgeMs / 1000)}${this.cookie.secure ? "; Secure" : ""}`;
  }

  clearedCookie(): string {
    return `${this.cookieName()}=; Path=/api; HttpOnly; SameSite=Strict; Max-Age=0${this.cookie.secure ? "; Secure" : ""}`;
  }

  /** The session id this request's cookie header carries for this listener. */
  sessionIdOf(cookieHeader: string | undefined): string | undefined {
    if (cookieHeader === undefined) return undefined;
    const name = `${this.cookieName()}=`;
    for (const part of cookieHeader.split(";")) {
      const p = part.trim();
      if (p.startsWith(name)) return p.slice(name.length);
    }
    return undefined;
  }

  update(config: ApiConfig): void {
    const settings = authSettings(config, sha256);
    const before = this.authenticator.current.users;
    this.authenticator.update(settings);
    // Streams opened under a role a reload took away or changed close; the client opens them again with what it has now.
    for (const [name, entry] of before) if (settings.users.get(name)?.role !== entry.role) this.closeKey(`user:${name}`);
    const next = this.resolve(settings.stateFile);
    if (next !== this.statePath) this.host.log.warn({ target: "api", state_file: this.statePath }, "api.http.auth.state_file changed; it takes effect after a restart");
    // Users removed or given another role: their sessions end and their open streams close.
    for (const hash of this.credentials.endSessionsExcept(new Set(settings.users.keys()))) this.closeKey(`session:${hash}`);
    void this.save().catch(() => undefined);
  }

  /** Writes the state file now; resolves when it is on disk. */
  save(): Promise<unknown> {
    return ask(this.actor, { type: "AUTH.SAVE" });
  }

  private touched(): void {
    if (this.actor.getSnapshot().status === "active") this.actor.send({ type: "AUTH.TOUCHED" });
  }

  /** Keeps `res` (an event stream, or any answer) until it closes, to close it when its credential is revoked. */
  track(principal: Principal, res: ServerResponse): void {
    if (principal.keys.length === 0) return;
    for (const key of principal.keys) {
      let set = this.open.get(key);
      if (!set) this.open.set(key, (set = new Set()));
      set.add(res);
    }
    // A stream outlives no credential: a token's expiry, a session's absolute lifetime.
    const session = principal.session;
    const expires = principal.token?.expires_at_ms ?? (session ? session.created_at_ms + this.authenticator.current.sessions.absoluteMs : null);
    const left = expires === null ? null : Math.max(0, expires - this.host.now());
    // setTimeout fires at once past 2^31 - 1 ms (24.8 days): a stream open that long is not closed by this.
    const timer = left === null || left > MAX_TIMER_MS ? null : setTimeout(() => res.destroy(), left);
    timer?.unref();
    res.once("close", () => {
      if (timer) clearTimeout(timer);
      for (const key of principal.keys) {
        const set = this.open.get(key);
        set?.delete(res);
        if (set?.size === 0) this.open.delete(key);
      }
    });
  }

  /** Ends every open response of a credential (`token:<id>`, `session:<hash>`, `user:<name>`), but `except` (the answer to the request that ends it). */
  closeKey(key: string, except?: ServerResponse): void {
    for (const res of this.open.get(key) ?? []) if (res !== except) res.destroy();
    this.open.delete(key);
  }

  async close(): Promise<void> {
    try {
      await ask(this.actor, { type: "AUTH.FLUSH" });
    } catch (err) {
      this.host.log.warn({ target: "api", err: (err as Error).message }, "the auth state file could not be written at stop");
    }
    this.actor.stop();
    this.hideActor();
    for (const key of [...this.open.keys()]) this.closeKey(key);
  }
}
