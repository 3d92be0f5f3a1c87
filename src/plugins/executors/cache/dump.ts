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
import type { Slicer } from "../../../engine/rules/slicer.js";
import { RouteError } from "../../../registry/control.js";
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

/** Bytes decoded in one step: a step (hash, framing, up to a few hundred full entries) takes a few ms at most. */
const PIECE = 64 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * Decodes a dump as its bytes arrive, in steps of at most PIECE bytes, keeping only the first
 * `capacity` live entries (the most recently used ones): the rest are framed and hashed, never
 * decoded, so memory stays at `capacity` entries whatever the dump's size. Nothing is returned
 * before the checksum at the end has been verified, so bad data never half-loads. A damaged file
 * is reported as a checksum mismatch even when an entry before the damage looks wrong.
 */
export class DumpDecoder {
  private readonly hash = createHash("sha256");
  /** The last DIGEST bytes seen: they may be the digest, so they are held back from hash and parser. */
  private tail = EMPTY;
  /** Bytes of a header or an entry that has not arrived whole yet. */
  private pending = EMPTY;
  private total = 0;
  private header = false;
  private count = 0;
  private elapsed = 0;
  /** Entries framed so far. */
  private index = 0;
  private readonly kept: Entry[] = [];
  private readonly seen = new Set<string>();
  /** The first entry that did not decode; reported only once the checksum is known to match. */
  private failure: InvalidDumpError | null = null;

  constructor(
    private readonly capacity: number,
    private readonly now: number,
    private readonly unixNow: number,
  ) {}

  /** Feeds the next bytes; a chunk bigger than PIECE is one step per PIECE for `feed`, one call here. */
  write(chunk: Buffer): void {
    this.total += chunk.length;
    const data = this.tail.length > 0 ? Buffer.concat([this.tail, chunk]) : chunk;
    if (data.length <= DIGEST) {
      this.tail = Buffer.from(data);
      return;
    }
    const body = data.subarray(0, data.length - DIGEST);
    this.tail = Buffer.from(data.subarray(data.length - DIGEST));
    this.hash.update(body);
    if (this.failure === null) this.parse(body);
  }

  /** Checks the digest and completeness; the kept entries, most recently used first. */
  finish(): Entry[] {
    if (this.total < HEADER + DIGEST || !this.header) throw new InvalidDumpError("not a Sluice cache dump");
    if (!this.hash.digest().equals(this.tail)) throw new InvalidDumpError("cache dump checksum mismatch (file damaged or incomplete)");
    if (this.failure !== null) throw this.failure;
    if (this.index < this.count || this.pending.length > 0) throw new InvalidDumpError("dump truncated inside an entry");
    return this.kept;
  }

  private parse(body: Buffer): void {
    const buf = this.pending.length > 0 ? Buffer.concat([this.pending, body]) : body;
    let pos = 0;
    if (!this.header) {
      const head = buf.subarray(0, Math.min(buf.length, MAGIC.length));
      if (!head.equals(MAGIC.subarray(0, head.length))) throw new InvalidDumpError("not a Sluice cache dump");
      if (buf.length < HEADER) {
        this.pending = Buffer.from(buf);
        return;
      }
      const version = buf[MAGIC.length];
      if (version !== VERSION) throw new InvalidDumpError(`unsupported cache dump version ${version} (this build reads ${VERSION})`);
      const dumpedAt = buf.readDoubleBE(MAGIC.length + 1);
      this.count = buf.readUInt32BE(MAGIC.length + 9);
      if (!Number.isFinite(dumpedAt)) this.failure = new InvalidDumpError("bad dump time");
      // A dump from the future (clock stepped back) is treated as written just now.
      this.elapsed = Math.max(0, this.unixNow - dumpedAt);
      this.header = true;
      pos = HEADER;
    }
    try {
      while (this.failure === null && pos < buf.length) {
        if (this.index >= this.count) throw new InvalidDumpError("trailing bytes after the last cache dump entry");
        if (buf.length - pos < 2) break;
        const keyLen = buf.readUInt16BE(pos);
        const wireLenAt = pos + ENTRY_FIXED + keyLen - 2;
        if (buf.length < wireLenAt + 2) break;
        const end = wireLenAt + 2 + buf.readUInt16BE(wireLenAt);
        if (buf.length < end) break;
        this.index++;
        if (this.kept.length < this.capacity) this.entry(buf, pos, keyLen, end);
        pos = end;
      }
    } catch (err) {
      if (!(err instanceof InvalidDumpError)) throw err;
      this.failure = err;
    }
    this.pending = this.failure === null && pos < buf.length ? Buffer.from(buf.subarray(pos)) : EMPTY;
  }

  /** Decodes the entry at `at` (framing known to be whole) and keeps it when it is still live. */
  private entry(buf: Buffer, at: number, keyLen: number, end: number): void {
    const n = this.index;
    const fail = (why: string): never => {
      throw new InvalidDumpError(`cache dump entry ${n}: ${why}`);
    };
    let pos = at + 2;
    const key = buf.toString("utf8", pos, pos + keyLen);
    pos += keyLen;
    const parsed = parseKey(key);
    if (!parsed) fail("malformed key");
    if (this.seen.has(key)) fail("duplicate key");
    const fields = parsed as NonNullable<typeof parsed>;
    const flags = buf[pos];
    const ttl = buf.readUInt32BE(pos + 1);
    const age = buf.readDoubleBE(pos + 5);
    const freshLeft = buf.readDoubleBE(pos + 13);
    const expireLeft = buf.readDoubleBE(pos + 21);
    const idle = buf.readDoubleBE(pos + 29);
    const wire = Buffer.from(buf.subarray(pos + 39, end));
    if (flags > 1 || ttl > 0x7fffffff) fail("bad flags or ttl");
    if (![age, freshLeft, expireLeft, idle].every(Number.isFinite) || age < 0 || idle < 0 || expireLeft <= 0 || freshLeft > expireLeft) fail("bad times");
    const { now, elapsed } = this;
    try {
      const index = indexMessage(wire);
      const qnameEnd = storedQuestionEnd(wire, index, fields);
      if (qnameEnd < 0) fail("message does not answer its key");
      if (expireLeft - elapsed <= 0) return;
      const e = restoreEntry(fields, wire, index, ttl, flags === 1, now - age - elapsed, now + freshLeft - elapsed, now + expireLeft - elapsed, qnameEnd);
      e.lastAccess = Math.floor(now - idle - elapsed);
      this.seen.add(key);
      this.kept.push(e);
    } catch (err) {
      if (err instanceof InvalidDumpError) throw err;
      fail(`unreadable message (${(err as Error).message})`);
    }
  }
}

/**
 * Decodes a dump held in memory (tests, small dumps): live entries most recently used first, at
 * most `capacity`, with times moved to monotonic `now`. Throws InvalidDumpError on bad data.
 */
export function decodeDump(data: Buffer, now: number, unixNow: number, capacity = Infinity): Entry[] {
  const d = new DumpDecoder(capacity, now, unixNow);
  for (let at = 0; at < data.length; at += PIECE) d.write(data.subarray(at, at + PIECE));
  return d.finish();
}

/**
 * Decodes a dump as it streams in, in slices that yield to the event loop (a 200 MB dump never
 * stalls DNS): up to `capacity` live entries, most recently used first. A source that fails (an
 * upload cut short, a read error) is an InvalidDumpError; a RouteError from the source (its size
 * limit) passes through. `now` is the cache's monotonic clock, `unixNow` its wall clock.
 */
export async function decodeDumpStream(source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, capacity: number, slicer: Slicer, now: number, unixNow: number): Promise<Entry[]> {
  const d = new DumpDecoder(capacity, now, unixNow);
  try {
    for await (const chunk of source) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      for (let at = 0; at < buf.length; at += PIECE) {
        d.write(buf.subarray(at, at + PIECE));
        if (slicer.dueNow()) await slicer.pause();
      }
    }
  } catch (err) {
    if (err instanceof RouteError) throw err;
    throw new InvalidDumpError(`the dump could not be read to its end (${(err as Error).message})`);
  }
  return d.finish();
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
