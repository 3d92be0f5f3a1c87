// Password hashes for api.http.auth.users: scrypt from node:crypto, the parameters written in the
// hash so they can be raised later without breaking old hashes:
//   $scrypt$ln=15,r=8,p=1$<salt, base64 without padding>$<32-byte key, base64 without padding>
// scrypt runs on libuv's thread pool, never on the event loop; a few run at once and a bounded
// number wait (more → auth_busy), so a flood of sign-ins cannot queue without end.

import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { b64, DEFAULT_PARAMS, KEY_BYTES, memoryOf, SALT_BYTES, type ParsedHash, type ScryptParams } from "../../config/password-hash.js";

export { DEFAULT_PARAMS, parseHash, type ParsedHash, type ScryptParams } from "../../config/password-hash.js";

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = { N: 2 ** params.ln, r: params.r, p: params.p, maxmem: memoryOf(params) + 1024 * 1024 };
  return new Promise((resolve, reject) => scrypt(password.normalize("NFC"), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_PARAMS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, params);
  return `$scrypt$ln=${params.ln},r=${params.r},p=${params.p}$${b64(salt)}$${b64(key)}`;
}

/** True when `password` is the one `hash` was made from; the comparison takes the same time whatever matches. */
export async function verifyPassword(hash: ParsedHash, password: string): Promise<boolean> {
  const key = await derive(password, hash.salt, hash.params);
  return timingSafeEqual(key, hash.key);
}

/** Checked for a user name nobody has, so an unknown user costs what a wrong password costs. */
export function dummyHash(params: ScryptParams = DEFAULT_PARAMS): ParsedHash {
  return { params, salt: randomBytes(SALT_BYTES), key: randomBytes(KEY_BYTES) };
}

/** Thrown when more checks wait than the pool takes: the caller answers auth_busy. */
export class PasswordPoolFull extends Error {
  constructor() {
    super("too many password checks are waiting");
    this.name = "PasswordPoolFull";
  }
}

/** Runs at most `running` password checks at once and lets at most `waiting` more wait. */
export class PasswordPool {
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly running = 2,
    private readonly waiting = 32,
  ) {}

  async verify(hash: ParsedHash, password: string): Promise<boolean> {
    if (this.active >= this.running) {
      if (this.queue.length >= this.waiting) throw new PasswordPoolFull();
      // The slot is handed over by the check that ends (active stays the same).
      await new Promise<void>((resolve) => this.queue.push(resolve));
    } else this.active++;
    try {
      return await verifyPassword(hash, password);
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
    }
  }
}
