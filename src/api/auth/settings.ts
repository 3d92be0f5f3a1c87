// api.http.auth as the authenticator uses it: the users with their parsed hashes and roles, the
// single user of earlier versions (an admin), session lifetimes and the sign-in throttle; and the
// checks `sluice check` runs on it (the schema cannot parse a hash or a duration).

import { parseDuration, durationProblem } from "../../engine/duration.js";
import type { ApiConfig, AuthConfig } from "../../config/schema.js";
import { parseHash, type ParsedHash } from "./passwords.js";
import type { SessionLifetimes } from "./credentials.js";
import type { Role } from "./roles.js";
import { DEFAULT_THROTTLE, type ThrottleSettings } from "./throttle.js";

export interface UserEntry {
  role: Role;
  /** A configured hash, or the legacy plain password's sha256 (compared directly). */
  hash: ParsedHash | null;
  plain: Buffer | null;
}

export interface AuthSettings {
  /** Requests must authenticate: users are configured, or TLS requires a client certificate. */
  required: boolean;
  /** TLS requires a client certificate and no users are configured: the certificate is the credential. */
  certificateOnly: boolean;
  users: ReadonlyMap<string, UserEntry>;
  stateFile: string;
  sessions: SessionLifetimes;
  throttle: ThrottleSettings;
}

export const DEFAULT_STATE_FILE = "data/auth.json";
export const DEFAULT_SESSIONS: SessionLifetimes = { idleMs: 12 * 3_600_000, absoluteMs: 7 * 86_400_000 };

const ms = (value: number | string | undefined, fallback: number): number => (value === undefined ? fallback : parseDuration(value));

export function authSettings(config: ApiConfig, plainHash: (password: string) => Buffer): AuthSettings {
  const auth: AuthConfig = config.auth ?? {};
  const users = new Map<string, UserEntry>();
  for (const u of auth.users ?? []) {
    const hash = parseHash(u.password_hash);
    // `sluice check` refuses a bad hash; should one arrive anyway, nobody signs in as that user.
    if (typeof hash !== "string") users.set(u.name, { role: u.role, hash, plain: null });
  }
  if (auth.username !== undefined && auth.password !== undefined && !users.has(auth.username)) {
    users.set(auth.username, { role: "admin", hash: null, plain: plainHash(auth.password) });
  }
  const mtls = config.ssl?.require_client_cert === true && config.ssl.cert !== undefined;
  const t = auth.throttle ?? {};
  return {
    required: users.size > 0 || mtls,
    certificateOnly: mtls && users.size === 0,
    users,
    stateFile: auth.state_file ?? DEFAULT_STATE_FILE,
    sessions: { idleMs: ms(auth.session?.idle, DEFAULT_SESSIONS.idleMs), absoluteMs: ms(auth.session?.absolute, DEFAULT_SESSIONS.absoluteMs) },
    throttle: {
      windowMs: ms(t.window, DEFAULT_THROTTLE.windowMs),
      addressLimit: t.address_failures ?? DEFAULT_THROTTLE.addressLimit,
      userLimit: t.user_failures ?? DEFAULT_THROTTLE.userLimit,
      firstLockMs: ms(t.first_lock, DEFAULT_THROTTLE.firstLockMs),
      maxLockMs: ms(t.max_lock, DEFAULT_THROTTLE.maxLockMs),
    },
  };
}

/** What is wrong with api.http.auth beyond its schema: paths below `api.http`. */
export function authProblems(auth: AuthConfig | undefined): { path: string[]; message: string }[] {
  if (!auth) return [];
  const problems: { path: string[]; message: string }[] = [];
  const seen = new Set<string>();
  (auth.users ?? []).forEach((u, i) => {
    const hash = parseHash(u.password_hash);
    if (typeof hash === "string") problems.push({ path: ["auth", "users", String(i), "password_hash"], message: `api.http.auth.users[${i}].password_hash ${hash}` });
    if (seen.has(u.name)) problems.push({ path: ["auth", "users", String(i), "name"], message: `api.http.auth.users[${i}]: user '${u.name}' is listed twice` });
    seen.add(u.name);
  });
  if (auth.username !== undefined && seen.has(auth.username)) {
    problems.push({ path: ["auth", "username"], message: `api.http.auth.username '${auth.username}' is also in auth.users: keep one` });
  }
  const durations: [string[], number | string | undefined, number, number][] = [
    [["session", "idle"], auth.session?.idle, 60_000, 366 * 86_400_000],
    [["session", "absolute"], auth.session?.absolute, 60_000, 366 * 86_400_000],
    [["throttle", "window"], auth.throttle?.window, 1000, 86_400_000],
    [["throttle", "first_lock"], auth.throttle?.first_lock, 1000, 86_400_000],
    [["throttle", "max_lock"], auth.throttle?.max_lock, 1000, 7 * 86_400_000],
  ];
  for (const [path, value, min, max] of durations) {
    const problem = durationProblem(`api.http.auth.${path.join(".")}`, value, min, max);
    if (problem) problems.push({ path: ["auth", ...path], message: problem });
  }
  return problems;
}
