// Password hashes of api.http.auth.users (src/api/auth/passwords.ts): the hash string's format, checks
// of right and wrong passwords, the hashes parseHash refuses and why, NFC normalisation, and the pool
// that bounds how many scrypt checks run at once (observed through async_hooks: each check is one
// SCRYPTREQUEST on libuv's thread pool). ln=10 keeps every hash here to a millisecond or so.
import { createHook } from "node:async_hooks";
import { describe, expect, test } from "vitest";
import { DEFAULT_PARAMS, dummyHash, hashPassword, parseHash, PasswordPool, PasswordPoolFull, verifyPassword, type ParsedHash, type ScryptParams } from "../../src/api/auth/passwords.js";

const FAST: ScryptParams = { ln: 10, r: 8, p: 1 };
const SALT = "AAAAAAAAAAAAAAAAAAAAAA";
const KEY = "B".repeat(43);

function parsed(text: string): ParsedHash {
  const hash = parseHash(text);
  if (typeof hash === "string") throw new Error(`${text} ${hash}`);
  return hash;
}

describe("hashPassword and verifyPassword", () => {
  test("the hash names its parameters, a 16-byte salt and a 32-byte key, base64 without padding; each hash has its own salt", async () => {
    const a = await hashPassword("s3cret", FAST);
    expect(a).toMatch(/^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    const h = parsed(a);
    expect(h.params).toEqual(FAST);
    expect([h.salt.length, h.key.length]).toEqual([16, 32]);
    const b = await hashPassword("s3cret", FAST);
    expect(b).not.toBe(a);
    expect(DEFAULT_PARAMS).toEqual({ ln: 15, r: 8, p: 1 });
  });

  test("the right password is accepted; a wrong one, a prefix, one with a trailing newline and the empty one are not", async () => {
    const h = parsed(await hashPassword("correct horse", FAST));
    expect(await verifyPassword(h, "correct horse")).toBe(true);
    for (const wrong of ["correct hors", "correct horse\n", "Correct horse", "", "correct horse "]) expect(await verifyPassword(h, wrong), JSON.stringify(wrong)).toBe(false);
  });

  test("other parameters in the hash are the ones checked with", async () => {
    const params: ScryptParams = { ln: 11, r: 4, p: 2 };
    const text = await hashPassword("pw", params);
    expect(text.startsWith("$scrypt$ln=11,r=4,p=2$")).toBe(true);
    const h = parsed(text);
    expect(await verifyPassword(h, "pw")).toBe(true);
    // The same salt and key read with other parameters no longer match.
    expect(await verifyPassword({ ...h, params: { ln: 11, r: 8, p: 1 } }, "pw")).toBe(false);
  });

  test("a password is compared in NFC: a precomposed é and e + combining acute are the same password", async () => {
    const composed = "caf\u00e9";
    const decomposed = "cafe\u0301";
    expect(composed).not.toBe(decomposed);
    expect(await verifyPassword(parsed(await hashPassword(composed, FAST)), decomposed)).toBe(true);
    expect(await verifyPassword(parsed(await hashPassword(decomposed, FAST)), composed)).toBe(true);
    expect(await verifyPassword(parsed(await hashPassword(composed, FAST)), "cafe")).toBe(false);
  });

  test("the dummy hash (for unknown users) has the default parameters and matches nothing", async () => {
    const d = dummyHash(FAST);
    expect([d.params, d.salt.length, d.key.length]).toEqual([FAST, 16, 32]);
    expect(await verifyPassword(d, "")).toBe(false);
    expect(dummyHash().params).toEqual(DEFAULT_PARAMS);
  });
});

describe("parseHash", () => {
  const NOT_OURS = "is not a password hash from `sluice passwd` ($scrypt$ln=…,r=…,p=…$salt$key)";
  const RANGE = "has scrypt parameters out of range (ln 10–20, r 1–32, p 1–16)";
  const MEMORY = "needs more than 1 GiB of memory per check (lower ln or r)";

  test.each([
    ["", NOT_OURS],
    ["hunter2", NOT_OURS],
    ["$2b$12$abcdefghijklmnopqrstuuJ9Q1fJ6z5Xv9yZQeYhYQvW1s8sJ2a", NOT_OURS],
    [`$scrypt$ln=15,r=8$${SALT}$${KEY}`, NOT_OURS],
    [`$scrypt$r=8,ln=15,p=1$${SALT}$${KEY}`, NOT_OURS],
    [`$scrypt$ln=15,r=8,p=1$${SALT}$${KEY}=`, NOT_OURS],
    [`$scrypt$ln=15,r=8,p=1$${SALT}$${KEY.slice(1)}`, NOT_OURS],
    [`$scrypt$ln=15,r=8,p=1$short$${KEY}`, NOT_OURS],
    [`$scrypt$ln=15,r=8,p=1$${SALT}$${KEY}\n`, NOT_OURS],
    [` $scrypt$ln=15,r=8,p=1$${SALT}$${KEY}`, NOT_OURS],
    [`$scrypt$ln=100,r=8,p=1$${SALT}$${KEY}`, NOT_OURS],
    [`$scrypt$ln=9,r=8,p=1$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=21,r=8,p=1$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=15,r=0,p=1$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=15,r=33,p=1$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=15,r=8,p=0$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=15,r=8,p=17$${SALT}$${KEY}`, RANGE],
    [`$scrypt$ln=20,r=9,p=1$${SALT}$${KEY}`, MEMORY],
    [`$scrypt$ln=19,r=32,p=1$${SALT}$${KEY}`, MEMORY],
    [`$scrypt$ln=17,r=8,p=16$${SALT}$${KEY}`, MEMORY],
  ])("%j: %s", (text, message) => {
    expect(parseHash(text)).toBe(message);
  });

  test("the largest hashes it takes: 1 GiB exactly, and p up to 16 at a small N", () => {
    expect(parsed(`$scrypt$ln=20,r=8,p=1$${SALT}$${KEY}`).params).toEqual({ ln: 20, r: 8, p: 1 });
    expect(parsed(`$scrypt$ln=18,r=32,p=1$${SALT}$${KEY}`).params).toEqual({ ln: 18, r: 32, p: 1 });
    expect(parsed(`$scrypt$ln=10,r=1,p=16$${SALT}$${KEY}`).params).toEqual({ ln: 10, r: 1, p: 16 });
    // The salt is read as written (any length from 12 bytes up): hashes of other tools' scrypt keep working.
    expect(parsed(`$scrypt$ln=10,r=8,p=1$${"A".repeat(64)}$${KEY}`).salt.length).toBe(48);
  });
});

describe("PasswordPool", () => {
  /** The most scrypt computations seen running at once while `fn` runs. */
  async function mostAtOnce(fn: () => Promise<unknown>): Promise<number> {
    const live = new Set<number>();
    let most = 0;
    const hook = createHook({
      init(id, type) {
        if (type !== "SCRYPTREQUEST") return;
        live.add(id);
        most = Math.max(most, live.size);
      },
      after(id) {
        live.delete(id);
      },
    }).enable();
    try {
      await fn();
    } finally {
      hook.disable();
    }
    return most;
  }

  test("runs at most two checks at once; the others wait their turn and get their own answers", async () => {
    const h = parsed(await hashPassword("pw", FAST));
    const pool = new PasswordPool();
    let results: boolean[] = [];
    const most = await mostAtOnce(async () => {
      results = await Promise.all(Array.from({ length: 8 }, (_, i) => pool.verify(h, i % 2 === 0 ? "pw" : "wrong")));
    });
    expect(most).toBe(2);
    expect(results).toEqual([true, false, true, false, true, false, true, false]);
    // Without the pool, the same checks all start at once.
    expect(await mostAtOnce(() => Promise.all(Array.from({ length: 8 }, () => verifyPassword(h, "pw"))))).toBe(8);
  });

  test("beyond the queue a check is refused at once with PasswordPoolFull; the slots come back when the checks end", async () => {
    const h = parsed(await hashPassword("pw", FAST));
    const pool = new PasswordPool(2, 3);
    const order: string[] = [];
    const taken = Array.from({ length: 5 }, (_, i) => pool.verify(h, "pw").then((ok) => order.push(`${i}:${ok}`)));
    const refused = pool.verify(h, "pw").catch((err: unknown) => {
      order.push("refused");
      return err;
    });
    const err = await refused;
    expect(err).toBeInstanceOf(PasswordPoolFull);
    expect((err as Error).message).toBe("too many password checks are waiting");
    // Refused before any check that was taken ended.
    expect(order).toEqual(["refused"]);
    await Promise.all(taken);
    expect(order.slice(1).sort()).toEqual(["0:true", "1:true", "2:true", "3:true", "4:true"]);
    // All five ended: two run and three wait again, and a sixth is refused again.
    const again = Array.from({ length: 5 }, () => pool.verify(h, "pw"));
    await expect(pool.verify(h, "pw")).rejects.toBeInstanceOf(PasswordPoolFull);
    expect(await Promise.all(again)).toEqual([true, true, true, true, true]);
  });

  test("a check that throws frees its slot too", async () => {
    const pool = new PasswordPool(1, 0);
    const bad: ParsedHash = { params: { ln: 10, r: 8, p: 1 }, salt: Buffer.alloc(16), key: Buffer.alloc(5) };
    // A key of the wrong length: timingSafeEqual throws once scrypt has run.
    await expect(pool.verify(bad, "pw")).rejects.toThrow();
    const good = parsed(await hashPassword("pw", FAST));
    expect(await pool.verify(good, "pw")).toBe(true);
  });
});
