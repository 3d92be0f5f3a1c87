// The text form of a password hash in api.http.auth.users (written by `sluice passwd`):
//   $scrypt$ln=15,r=8,p=1$<salt, base64 without padding>$<32-byte key, base64 without padding>
// Parsed here, where `sluice check` needs it; made and checked in src/api/auth/passwords.ts.

export interface ScryptParams {
  /** log2 of N, the CPU/memory cost. */
  ln: number;
  r: number;
  p: number;
}

/** N = 32768, r = 8: 32 MiB and some tens of milliseconds per check (OWASP's minimum is N = 2^17 with r = 8, p = 1 for scrypt at 128 MiB; 2^15 keeps a small gateway responsive). */
export const DEFAULT_PARAMS: ScryptParams = { ln: 15, r: 8, p: 1 };
export const KEY_BYTES = 32;
export const SALT_BYTES = 16;
const HASH = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{16,64})\$([A-Za-z0-9+/]{43})$/;

export interface ParsedHash {
  params: ScryptParams;
  salt: Buffer;
  key: Buffer;
}

export const b64 = (bytes: Buffer): string => bytes.toString("base64").replace(/=+$/, "");

/** The hash's parts, or a message saying what is wrong with it. */
export function parseHash(text: string): ParsedHash | string {
  const m = HASH.exec(text);
  if (!m) return "is not a password hash from `sluice passwd` ($scrypt$ln=…,r=…,p=…$salt$key)";
  const params = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  if (params.ln < 10 || params.ln > 20 || params.r < 1 || params.r > 32 || params.p < 1 || params.p > 16) return "has scrypt parameters out of range (ln 10–20, r 1–32, p 1–16)";
  if (memoryOf(params) > 1024 * 1024 * 1024) return "needs more than 1 GiB of memory per check (lower ln or r)";
  return { params, salt: Buffer.from(m[4] ?? "", "base64"), key: Buffer.from(m[5] ?? "", "base64") };
}

export const memoryOf = (p: ScryptParams): number => 128 * 2 ** p.ln * p.r * p.p;

