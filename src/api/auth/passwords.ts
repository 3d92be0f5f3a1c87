// Password hashes for api.http.auth.users: scrypt from node:crypto, the parameters written in the
// hash so they can be raised later without breaking old hashes:
//   $scrypt$ln=15,r=8,p=1$<salt, base64 without padding>$<32-byte key, base64 without padding>
// scrypt runs on libuv's thread pool, never on the event loop; a few run at once and a bounded
// number wait (more → auth_busy), so a flood of sign-ins cannot queue without end.

import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

export interface ScryptParams {
  /** log2 of N, the CPU/memory cost. */
  ln: number;
  r: number;
  p: number;
}

/** N = 32768, r = 8: 32 MiB and some tens of milliseconds per check (OWASP's minimum is N = 2^17 with r = 8, p = 1 for scrypt at 128 MiB; 2^15 keeps a small gateway responsive). */
export const DEFAULT_PARAMS: ScryptParams = { ln: 15, r: 8, p: 1 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const HASH = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{16,64})\$([A-Za-z0-9+/]{43})$/;

export interface ParsedHash {
  params: ScryptParams;
  salt: Buffer;
  key: Buffer;
}

const b64 = (bytes: Buffer): string => bytes.toString("base64").replace(/=+$/, "");

/** The hash's parts, or a message saying what is wrong with it. */
export function parseHash(text: string): ParsedHash | string {
  const m = HASH.exec(text);
  if (!m) return "is not a password hash from `sluice passwd` ($scrypt$ln=…,r=…,p=…$salt$key)";
  const params = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  if (params.ln < 10 || params.ln > 20 || params.r < 1 || params.r > 32 || params.p < 1 || params.p > 16) return "has scrypt parameters out of range (ln 10–20, r 1–32, p 1–16)";
  if (memoryOf(params) > 1024 * 1024 * 1024) return "needs more than 1 GiB of memory per check (lower ln or r)";
  return { params, salt: Buffer.from(m[4] ?? "", "base64"), key: Buffer.from(m[5] ?? "", "base64") };
}

const memoryOf = (p: ScryptParams): number => 128 * 2 ** p.ln * p.r * p.p;

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
