// api.http.auth as the authenticator uses it: the users with their parsed hashes and roles, the
// single user of earlier versions (an admin), session lifetimes and the sign-in throttle; and the
// checks `sluice check` runs on it (the schema cannot parse a hash or a duration).

import { parseDuration } from "../../engine/duration.js";
import type { ApiConfig, AuthConfig } from "../../config/schema.js";
import { parseHash, type ParsedHash } from "../../config/password-hash.js";
import type { SessionLifetimes } from "./credentials.js";
import type { Role } from "../../registry/roles.js";
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
