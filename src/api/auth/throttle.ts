// Failed sign-ins counted per client address and per user name. `limit` failures within `window`
// lock the key out: every further attempt is answered 429 with Retry-After until the lock ends,
// and each lock that follows another within `window` of its end lasts twice as long (up to
// `maxLock`). Plain counters in a bounded map: a check is O(1), nothing here waits or does I/O.

export interface ThrottleSettings {
  windowMs: number;
  addressLimit: number;
  userLimit: number;
  firstLockMs: number;
  maxLockMs: number;
}

export const DEFAULT_THROTTLE: ThrottleSettings = { windowMs: 5 * 60_000, addressLimit: 10, userLimit: 30, firstLockMs: 30_000, maxLockMs: 15 * 60_000 };

/** Keys remembered at most; the oldest are forgotten first (an address that stops trying goes first). */
const MAX_KEYS = 10_000;

interface Counter {
  failures: number;
  windowStart: number;
  lockedUntil: number;
  /** Locks in a row: the next one lasts firstLock × 2^locks. */
  locks: number;
}

export interface Lockout {
  by: "address" | "user";
  retryAfterMs: number;
}

export class LoginThrottle {
  private readonly counters = new Map<string, Counter>();

  constructor(
    private readonly settings: ThrottleSettings,
    private readonly now: () => number,
  ) {}

  /** The lock in force for this address (and user, when one is named), or null: the attempt may be checked. */
  locked(address: string, user?: string): Lockout | null {
    const t = this.now();
    const a = this.counters.get(`a:${address}`);
    if (a && a.lockedUntil > t) return { by: "address", retryAfterMs: a.lockedUntil - t };
    const u = user === undefined ? undefined : this.counters.get(`u:${user}`);
    if (u && u.lockedUntil > t) return { by: "user", retryAfterMs: u.lockedUntil - t };
    return null;
  }

  /** Counts a failed attempt; the lock it starts, if any. */
  failed(address: string, user?: string): Lockout | null {
    const byAddress = this.count(`a:${address}`, this.settings.addressLimit);
    const byUser = user === undefined ? null : this.count(`u:${user}`, this.settings.userLimit);
    if (byAddress !== null) return { by: "address", retryAfterMs: byAddress };
    return byUser === null ? null : { by: "user", retryAfterMs: byUser };
  }

  /** A successful sign-in clears the address's failures (not a lock: it was checked before). */
  succeeded(address: string): void {
    const a = this.counters.get(`a:${address}`);
    if (a && a.lockedUntil <= this.now()) a.failures = 0;
  }

  /** Addresses and users remembered now (bounded by MAX_KEYS). */
  get size(): number {
    return this.counters.size;
  }

  private count(key: string, limit: number): number | null {
    const t = this.now();
    let c = this.counters.get(key);
    if (c) this.counters.delete(key);
    else c = { failures: 0, windowStart: t, lockedUntil: 0, locks: 0 };
    // Re-inserted: the map's order is least recently failed first.
    this.counters.set(key, c);
    if (this.counters.size > MAX_KEYS) this.counters.delete(this.counters.keys().next().value as string);
    if (t - c.windowStart > this.settings.windowMs) {
      c.windowStart = t;
      c.failures = 0;
    }
    // A quiet window after the last lock ended forgives the earlier ones.
    if (c.locks > 0 && c.lockedUntil > 0 && t - c.lockedUntil > this.settings.windowMs) c.locks = 0;
    c.failures++;
    if (c.failures < limit) return null;
    const lock = Math.min(this.settings.firstLockMs * 2 ** c.locks, this.settings.maxLockMs);
    c.locks++;
    c.lockedUntil = t + lock;
    c.failures = 0;
    c.windowStart = t;
    return lock;
  }
}
