// The sign-in throttle (src/api/auth/throttle.ts) on an injected clock: a key (client address, user
// name) is locked after its limit of failures within the window; each lock that follows another lasts
// twice as long, up to the cap; a window without failures starts the count again, a quiet window after
// a lock forgives it; a user's lock and an address's are independent; the map of keys is bounded.
import { describe, expect, test } from "vitest";
import { DEFAULT_THROTTLE, LoginThrottle, type ThrottleSettings } from "../../src/api/auth/throttle.js";

const SETTINGS: ThrottleSettings = { windowMs: 60_000, addressLimit: 3, userLimit: 5, firstLockMs: 30_000, maxLockMs: 120_000 };

function throttle(settings: ThrottleSettings = SETTINGS): { t: LoginThrottle; clock: { now: number } } {
  const clock = { now: 1_000_000 };
  return { t: new LoginThrottle(settings, () => clock.now), clock };
}

/** `n` failures from `address` (as `user`, if given); the lock the last one started. */
function fail(t: LoginThrottle, n: number, address: string, user?: string): ReturnType<LoginThrottle["failed"]> {
  let last: ReturnType<LoginThrottle["failed"]> = null;
  for (let i = 0; i < n; i++) last = t.failed(address, user);
  return last;
}

describe("LoginThrottle", () => {
  test("the limit's failure locks the address; the lock counts down on the clock and ends", () => {
    const { t, clock } = throttle();
    expect(t.failed("10.0.0.1")).toBeNull();
    expect(t.failed("10.0.0.1")).toBeNull();
    expect(t.locked("10.0.0.1")).toBeNull();
    expect(t.failed("10.0.0.1")).toEqual({ by: "address", retryAfterMs: 30_000 });
    expect(t.locked("10.0.0.1")).toEqual({ by: "address", retryAfterMs: 30_000 });
    expect(t.locked("10.0.0.1", "anyone")).toEqual({ by: "address", retryAfterMs: 30_000 });
    clock.now += 12_345;
    expect(t.locked("10.0.0.1")).toEqual({ by: "address", retryAfterMs: 17_655 });
    // Other addresses are not touched.
    expect(t.locked("10.0.0.2")).toBeNull();
    clock.now += 17_654;
    expect(t.locked("10.0.0.1")?.retryAfterMs).toBe(1);
    clock.now += 1;
    expect(t.locked("10.0.0.1")).toBeNull();
    // The count started again with the lock: two more failures do not lock, the third does.
    expect(fail(t, 2, "10.0.0.1")).toBeNull();
    expect(t.failed("10.0.0.1")?.retryAfterMs).toBe(60_000);
  });

  test("Retry-After doubles lock after lock (30 s → 60 s → … ) up to max_lock, with the defaults", () => {
    const { t, clock } = throttle(DEFAULT_THROTTLE);
    expect(DEFAULT_THROTTLE).toEqual({ windowMs: 300_000, addressLimit: 10, userLimit: 30, firstLockMs: 30_000, maxLockMs: 900_000 });
    const locks: number[] = [];
    for (let round = 0; round < 8; round++) {
      expect(fail(t, DEFAULT_THROTTLE.addressLimit - 1, "192.0.2.7")).toBeNull();
      const lock = t.failed("192.0.2.7");
      expect(lock?.by).toBe("address");
      locks.push((lock?.retryAfterMs ?? 0) / 1000);
      // The next round starts the moment this lock ends.
      clock.now += lock?.retryAfterMs ?? 0;
    }
    expect(locks).toEqual([30, 60, 120, 240, 480, 900, 900, 900]);
  });

  test("failures further apart than the window do not add up", () => {
    const { t, clock } = throttle();
    expect(fail(t, 2, "10.0.0.1")).toBeNull();
    // The window counts from the first failure: just past it, the count starts again.
    clock.now += 60_001;
    expect(fail(t, 2, "10.0.0.1")).toBeNull();
    clock.now += 59_999;
    expect(t.failed("10.0.0.1")).toEqual({ by: "address", retryAfterMs: 30_000 });
    // Exactly at the window's end the failures still count.
    const b = throttle();
    expect(fail(b.t, 2, "10.0.0.9")).toBeNull();
    b.clock.now += 60_000;
    expect(b.t.failed("10.0.0.9")?.retryAfterMs).toBe(30_000);
  });

  test("a window without failures after a lock ends forgives it: the next lock is the first length again", () => {
    const { t, clock } = throttle();
    expect(fail(t, 3, "10.0.0.1")?.retryAfterMs).toBe(30_000);
    clock.now += 30_000;
    expect(fail(t, 3, "10.0.0.1")?.retryAfterMs).toBe(60_000);
    // A window after the end of that lock, to the millisecond: not forgiven yet.
    clock.now += 60_000 + 60_000;
    expect(fail(t, 3, "10.0.0.1")?.retryAfterMs).toBe(120_000);
    // A window and a millisecond after it ended: forgiven.
    clock.now += 120_000 + 60_001;
    expect(fail(t, 3, "10.0.0.1")?.retryAfterMs).toBe(30_000);
  });

  test("a user is locked after its own limit whichever addresses tried it; the user's lock and an address's are independent", () => {
    const { t } = throttle();
    // Five addresses, one failure each as alice: no address reaches its limit, alice does.
    for (let i = 1; i <= 4; i++) expect(t.failed(`10.0.1.${i}`, "alice")).toBeNull();
    expect(t.failed("10.0.1.5", "alice")).toEqual({ by: "user", retryAfterMs: 30_000 });
    expect(t.locked("10.0.9.9", "alice")).toEqual({ by: "user", retryAfterMs: 30_000 });
    // The same address may still sign in as someone else, or without a name (a token).
    expect(t.locked("10.0.1.5", "bob")).toBeNull();
    expect(t.locked("10.0.1.5")).toBeNull();
    // An address locked by failures under three names locks none of the names.
    const other = throttle();
    expect(other.t.failed("10.0.2.1", "u1")).toBeNull();
    expect(other.t.failed("10.0.2.1", "u2")).toBeNull();
    expect(other.t.failed("10.0.2.1", "u3")).toEqual({ by: "address", retryAfterMs: 30_000 });
    expect(other.t.locked("10.0.2.2", "u1")).toBeNull();
    expect(other.t.locked("10.0.2.1", "u1")).toEqual({ by: "address", retryAfterMs: 30_000 });
  });

  test("when one failure locks both, the address's lock is the one answered; a user's lock shows once the address's ends", () => {
    const { t, clock } = throttle({ ...SETTINGS, userLimit: 3 });
    expect(fail(t, 2, "10.0.3.1", "carol")).toBeNull();
    expect(t.failed("10.0.3.1", "carol")).toEqual({ by: "address", retryAfterMs: 30_000 });
    expect(t.locked("10.0.3.1", "carol")?.by).toBe("address");
    expect(t.locked("10.0.3.2", "carol")).toEqual({ by: "user", retryAfterMs: 30_000 });
    clock.now += 30_000;
    expect(t.locked("10.0.3.1", "carol")).toBeNull();
  });

  test("a successful sign-in clears the address's failures, but not a lock in force", () => {
    const { t, clock } = throttle();
    expect(fail(t, 2, "10.0.4.1")).toBeNull();
    t.succeeded("10.0.4.1");
    expect(fail(t, 2, "10.0.4.1")).toBeNull();
    expect(t.failed("10.0.4.1")?.retryAfterMs).toBe(30_000);
    t.succeeded("10.0.4.1");
    expect(t.locked("10.0.4.1")?.retryAfterMs).toBe(30_000);
    clock.now += 30_000;
    t.succeeded("10.0.4.1");
    expect(t.locked("10.0.4.1")).toBeNull();
  });

  test("at most 10 000 keys are remembered; the one that failed least recently is forgotten first", () => {
    const { t } = throttle();
    expect(t.failed("first")).toBeNull();
    for (let i = 0; i < 9_998; i++) t.failed(`198.18.${i >> 8}.${i & 255}`);
    expect(t.size).toBe(9_999);
    // A new failure of "first" makes it the most recent: the next new key pushes out the oldest other one.
    expect(t.failed("first")).toBeNull();
    t.failed("198.19.0.1");
    expect(t.size).toBe(10_000);
    t.failed("198.19.0.2");
    expect(t.size).toBe(10_000);
    // "first" kept its two failures: the third locks it.
    expect(t.failed("first")?.retryAfterMs).toBe(30_000);
    // The oldest one (198.18.0.0) was forgotten: its failures count from one again (limit 3).
    expect(fail(t, 2, "198.18.0.0")).toBeNull();
    expect(t.failed("198.18.0.0")?.retryAfterMs).toBe(30_000);
    for (let i = 0; i < 20_000; i++) t.failed(`203.0.${i >> 8}.${i & 255}`, `user${i}`);
    expect(t.size).toBe(10_000);
  });
});
