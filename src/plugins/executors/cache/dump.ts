// The cache dump: a versioned binary file that survives restarts, and its atomic write.
//
// Layout (big-endian): "SLUICE-CACHE" | u8 version (1) | f64 dump time, unix ms | u32 count |
// count × entry | sha256 of everything before it (32 bytes). An entry:
//   u16 key length, key (UTF-8) | u8 flags (bit 0 = negative) | u32 ttl s |
//   f64 age ms | f64 fresh ms left (≤ 0 when stale) | f64 ms left until expiry | f64 ms since last use |
//   u16 wire length, the stored DNS message.
// Times are relative to the dump time, so loading subtracts the wall-clock time that passed since.
// Entries are written most recently used first.

import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { indexMessage } from "../../../dns/view.js";
import { restoreEntry, storedQuestionEnd } from "./admit.js";
import { InvalidDumpError } from "./errors.js";
import { keyString, parseKey } from "./key.js";
import type { Entry } from "./store.js";

const MAGIC = Buffer.from("SLUICE-CACHE", "latin1");
const VERSION = 1;
const HEADER = MAGIC.length + 1 + 8 + 4;
const DIGEST = 32;
const ENTRY_FIXED = 2 + 1 + 4 + 8 * 4 + 2;

/** Serialises entries (most recently used first) as seen at monotonic `now` / wall-clock `unixNow`. */
export function encodeDump(entries: Iterable<Entry>, now: number, unixNow: number): Buffer {
  const parts: Buffer[] = [];
  let count = 0;
  let size = HEADER;
  for (const e of entries) {
    if (e.expireAt <= now) continue;
    const key = Buffer.from(keyString(e), "utf8");
    const head = Buffer.allocUnsafe(2 + key.length + ENTRY_FIXED - 2);
    let at = head.writeUInt16BE(key.length, 0);
    at += key.copy(head, at);
    at = head.writeUInt8(e.negative ? 1 : 0, at);
    at = head.writeUInt32BE(e.ttl, at);
    at = head.writeDoubleBE(now - e.cachedAt, at);
    at = head.writeDoubleBE(e.freshUntil - now, at);
    at = head.writeDoubleBE(e.expireAt - now, at);
    at = head.writeDoubleBE(now - e.lastAccess, at);
    head.writeUInt16BE(e.wire.length, at);
    parts.push(head, e.wire);
    size += head.length + e.wire.length;
    count++;
  }
  const header = Buffer.allocUnsafe(HEADER);
  MAGIC.copy(header, 0);
  header.writeUInt8(VERSION, MAGIC.length);
  header.writeDoubleBE(unixNow, MAGIC.length + 1);
  header.writeUInt32BE(count, MAGIC.length + 9);
  const body = Buffer.concat([header, ...parts], size);
  return Buffer.concat([body, createHash("sha256").update(body).digest()]);
}

class Reader {
  pos = 0;
  constructor(private readonly buf: Buffer) {}
  need(n: number, what: string): void {
    if (this.pos + n > this.buf.length) throw new InvalidDumpError(`dump truncated inside ${what}`);
  }
  u8(): number {
    return this.buf[this.pos++];
  }
  u16(): number {
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  f64(): number {
    const v = this.buf.readDoubleBE(this.pos);
    this.pos += 8;
    return v;
  }
  bytes(n: number): Buffer {
    const v = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
}

/**
 * Checks and decodes a whole dump before anything is used, so bad data never half-loads.
 * Returns live entries most recently used first, with times moved to monotonic `now`.
 */
export function decodeDump(data: Buffer, now: number, unixNow: number): Entry[] {
  if (data.length < HEADER + DIGEST || !data.subarray(0, MAGIC.length).equals(MAGIC)) throw new InvalidDumpError("not a Sluice cache dump");
  const version = data[MAGIC.length];
  if (version !== VERSION) throw new InvalidDumpError(`unsupported cache dump version ${version} (this build reads ${VERSION})`);
  const body = data.subarray(0, data.length - DIGEST);
  if (!createHash("sha256").update(body).digest().equals(data.subarray(data.length - DIGEST))) {
    throw new InvalidDumpError("cache dump checksum mismatch (file damaged or incomplete)");
  }
  const r = new Reader(body);
  r.pos = MAGIC.length + 1;
  const dumpedAt = r.f64();
  const count = r.u32();
  if (!Number.isFinite(dumpedAt)) throw new InvalidDumpError("bad dump time");
  // A dump from the future (clock stepped back) is treated as written just now.
  const elapsed = Math.max(0, unixNow - dumpedAt);
  const out: Entry[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const fail = (why: string): never => {
      throw new InvalidDumpError(`cache dump entry ${i + 1}: ${why}`);
    };
    r.need(2, "an entry");
    const keyLen = r.u16();
    r.need(keyLen + ENTRY_FIXED - 2, "an entry");
    const key = r.bytes(keyLen).toString("utf8");
    const parsed = parseKey(key);
    if (!parsed) fail("malformed key");
    if (seen.has(key)) fail("duplicate key");
    const fields = parsed as NonNullable<typeof parsed>;
    seen.add(key);
    const flags = r.u8();
    const ttl = r.u32();
    const age = r.f64();
    const freshLeft = r.f64();
    const expireLeft = r.f64();
    const idle = r.f64();
    const wireLen = r.u16();
    r.need(wireLen, "an entry's message");
    const wire = Buffer.from(r.bytes(wireLen));
    if (flags > 1 || ttl > 0x7fffffff) fail("bad flags or ttl");
    if (![age, freshLeft, expireLeft, idle].every(Number.isFinite) || age < 0 || idle < 0 || expireLeft <= 0 || freshLeft > expireLeft) fail("bad times");
    try {
      const index = indexMessage(wire);
      const qnameEnd = storedQuestionEnd(wire, index, fields);
      if (qnameEnd < 0) fail("message does not answer its key");
      if (expireLeft - elapsed <= 0) continue;
      const e = restoreEntry(fields, wire, index, ttl, flags === 1, now - age - elapsed, now + freshLeft - elapsed, now + expireLeft - elapsed, qnameEnd);
      e.lastAccess = Math.floor(now - idle - elapsed);
      out.push(e);
    } catch (err) {
      if (err instanceof InvalidDumpError) throw err;
      fail(`unreadable message (${(err as Error).message})`);
    }
  }
  if (r.pos !== body.length) throw new InvalidDumpError("trailing bytes after the last cache dump entry");
  return out;
}

/** Writes `data` so that `path` only ever holds a complete file: temp file in the same directory, fsync, rename. */
export async function writeFileAtomic(path: string, data: Buffer): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    const fh = await open(tmp, "w", 0o644);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  // Make the rename itself durable; not every platform can open a directory, which is fine.
  try {
    const d = await open(dir, "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    // best effort
  }
}
