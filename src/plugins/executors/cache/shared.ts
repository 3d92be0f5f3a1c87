// Between local entries and their Redis form (redis-tier.ts): times move between this process's
// monotonic clock and Unix ms, and an entry read back must still answer its key.

import { indexMessage, type WireIndex } from "../../../dns/view.js";
import { restoreEntry, storedQuestionEnd } from "./admit.js";
import { keyString, parseKey, type KeyParts } from "./key.js";
import { decodeShared, encodeShared, type RedisTier } from "./redis-tier.js";
import type { Entry } from "./store.js";

/** Writes a stored entry to Redis (fire-and-forget), for as long as it lives here. */
export function shareEntry(tier: RedisTier, e: Entry, now: number, unixNow: number): void {
  const offset = unixNow - now;
  const value = encodeShared({ negative: e.negative, ttl: e.ttl, freshUntil: e.freshUntil + offset, expireAt: e.expireAt + offset, wire: e.wire });
  tier.write(keyString(e), value, e.expireAt - now);
}

/** The entry a Redis value holds for `key`, with times on the monotonic clock; null when unusable or expired. */
export function adoptShared(key: KeyParts, value: Buffer, now: number, unixNow: number): Entry | null {
  const shared = decodeShared(value);
  if (shared === null || shared.expireAt <= unixNow) return null;
  let index: WireIndex;
  try {
    index = indexMessage(shared.wire);
  } catch {
    return null;
  }
  // Another program's value, or one written under the wrong key, is not served.
  const qnameEnd = storedQuestionEnd(shared.wire, index, key);
  if (qnameEnd < 0) return null;
  const fresh = now + (shared.freshUntil - unixNow);
  const expire = now + (shared.expireAt - unixNow);
  try {
    return restoreEntry(key, shared.wire, index, shared.ttl, shared.negative, fresh - shared.ttl * 1000, fresh, expire, qnameEnd);
  } catch {
    return null;
  }
}

/** Waits for the link a little, then reads up to `room` entries into `take`; null when Redis could not be read. */
export async function loadShared(tier: RedisTier, room: number, take: (key: KeyParts, value: Buffer) => boolean): Promise<number | null> {
  if (room <= 0 || !(await tier.link.whenReady(LOAD_WAIT_MS))) return null;
  try {
    return await tier.load(room, (id, value) => {
      const key = parseKey(id);
      return key !== null && take(key, value);
    });
  } catch (err) {
    tier.logLoadFailure(err);
    return null;
  }
}

/** How long a start waits for Redis before loading is given up (the cache still reads through on misses). */
const LOAD_WAIT_MS = 5_000;
