// Records as rows of PostgreSQL's COPY text format, for `COPY records_v1 (…) FROM STDIN` (pg-store.ts).
// A row is the columns' text forms separated by tabs and ended by a newline; in a value a backslash,
// tab, newline and carriage return (and the other C escapes) are written as backslash escapes, NULL as
// \N, bytea as its hex form `\x…` (whose backslash is doubled like any other), text[] as an array
// literal with every element quoted, jsonb as JSON text. NUL cannot be stored in PostgreSQL text and
// is left out (as pgText does). Strings are JavaScript strings, so the bytes sent are always UTF-8
// (a lone surrogate becomes U+FFFD); names from the wire are already presentation text (\DDD escapes).

import type { BatchRecord } from "./batch.js";
import { outcomeOf, questionsOf, storedName } from "./store.js";

/** The columns every row carries, in order (the COPY statement names them). */
export const COPY_COLUMNS = ["created_at_ms", "instance", "elapsed_us", "client_ip", "qname", "qtype", "question_count", "outcome", "error", "query", "response", "steps", "client_name", "client_groups"] as const;

/** Characters of a value that COPY text must not see as they are. */
const SPECIAL = /[\\\t\n\r\b\f\v\0]/;
const SPECIAL_ALL = /[\\\t\n\r\b\f\v\0]/g;
const ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "" };

/** `s` as a COPY text value (NUL left out). */
export function copyText(s: string): string {
  return SPECIAL.test(s) ? s.replace(SPECIAL_ALL, (c) => ESCAPES[c]) : s;
}

/** A text[] value: every element quoted (so `NULL`, empty strings, commas and braces stay text), `"` and `\` escaped inside the quotes. */
export function copyTextArray(items: readonly string[]): string {
  if (items.length === 0) return "{}";
  let out = "{";
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ",";
    out += `"${items[i].replace(/\0/g, "").replace(/["\\]/g, "\\$&")}"`;
  }
  return copyText(`${out}}`);
}

/** A bytea value in hex form, its backslash escaped for COPY (the encoder writes the hex straight into its chunk). */
export const copyBytea = (b: Buffer): string => `\\\\x${b.toString("hex")}`;

const NULL = "\\N";
/** Rows are handed to the connection in chunks of about this many bytes: PostgreSQL parses one while the next is encoded. */
const CHUNK_BYTES = 64 * 1024;
/** ASCII codes of the hex digits of every byte, two per byte. */
const HEX = Buffer.from(Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0")).join(""), "latin1");
/** `\\x` as COPY text (the backslash of bytea's hex form, escaped). */
const BYTEA_PREFIX = Buffer.from("\\\\x", "latin1");

/**
 * Encodes records as COPY rows into chunks of bytes. Keeps, for the writer's life, the COPY form of
 * each tag (as a JSON string) and of each group set (by the shared array the batch decoder hands out),
 * which repeat on nearly every row. Wire bytes are written as hex straight into the chunk.
 */
export class CopyEncoder {
  private readonly tags = new Map<string, string>();
  private readonly groupSets = new WeakMap<readonly string[], string>();
  private readonly instance: string;
  private buf = Buffer.allocUnsafe(0);
  private off = 0;

  constructor(instance: string) {
    this.instance = copyText(instance);
  }

  /** A tag as a JSON string inside COPY text (NUL left out: jsonb refuses \u0000). */
  private tag(t: string): string {
    let s = this.tags.get(t);
    if (s === undefined) {
      s = copyText(JSON.stringify(t.replace(/\0/g, "")));
      // Tags come from the configuration: few. The bound guards a writer that lives through many reloads.
      if (this.tags.size >= 10_000) this.tags.clear();
      this.tags.set(t, s);
    }
    return s;
  }

  private groups(g: readonly string[]): string {
    let s = this.groupSets.get(g);
    if (s === undefined) {
      s = copyTextArray(g);
      this.groupSets.set(g, s);
    }
    return s;
  }

  /** The steps as a jsonb array of {s, n, k, t, o} (PgStep). */
  private steps(r: BatchRecord): string {
    let out = "[";
    for (let i = 0; i < r.steps.length; i++) {
      const s = r.steps[i];
      out += `${i > 0 ? "," : ""}{"s":${this.tag(s.sequenceTag)},"n":${s.nodeIndex === null ? "null" : s.nodeIndex},"k":${s.kind},"t":${this.tag(s.tag)},"o":${s.outcome}}`;
    }
    return `${out}]`;
  }

  private hex(b: Buffer): void {
    const out = this.buf;
    let p = this.off;
    BYTEA_PREFIX.copy(out, p);
    p += BYTEA_PREFIX.length;
    for (let i = 0; i < b.length; i++) {
      const h = b[i] << 1;
      out[p++] = HEX[h];
      out[p++] = HEX[h + 1];
    }
    this.off = p;
  }

  private text(s: string): void {
    this.off += this.buf.write(s, this.off, "utf8");
  }

  /** Appends one row (newline included, COPY_COLUMNS order) to the chunk; false when the chunk has no room for it. */
  private row(r: BatchRecord): boolean {
    const questions = questionsOf(r.query);
    const q0 = questions[0];
    const outcome = outcomeOf(r.response, r.error);
    const response = outcome >= 0 ? r.response : null;
    const head = `${Math.round(r.createdAtMs)}\t${this.instance}\t${r.elapsedUs}\t${copyText(r.clientIp)}\t${copyText(q0 ? storedName(q0.name) : "")}\t${q0 ? q0.type : 0}\t${questions.length}\t${outcome}\t${r.error === null ? NULL : copyText(r.error)}\t`;
    const tail = `\t${this.steps(r)}\t${r.clientName === null ? NULL : copyText(r.clientName)}\t${this.groups(r.clientGroups)}\n`;
    // UTF-8 takes at most 3 bytes per UTF-16 unit; hex 2 per byte.
    const most = 3 * (head.length + tail.length) + 2 * (BYTEA_PREFIX.length + r.query.length + (response === null ? 0 : response.length)) + 2;
    if (this.off + most > this.buf.length) {
      if (this.off > 0) return false;
      this.buf = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, most));
    }
    this.text(head);
    this.hex(r.query);
    this.buf[this.off++] = 0x09;
    if (response === null) this.text(NULL);
    else this.hex(response);
    this.text(tail);
    return true;
  }

  /**
   * `first` and the rest of `rows` as chunks of about CHUNK_BYTES, encoded (and `rows` advanced) as they
   * are asked for; each chunk its own memory (the socket may still hold the previous). Counts the rows in `encoded`.
   */
  *chunks(first: BatchRecord, rows: Iterator<BatchRecord>, encoded: { rows: number }): Generator<Buffer> {
    this.buf = Buffer.allocUnsafe(CHUNK_BYTES);
    this.off = 0;
    for (let r: IteratorResult<BatchRecord> = { done: false, value: first }; r.done !== true; ) {
      if (this.row(r.value)) {
        encoded.rows++;
        r = rows.next();
      } else {
        yield this.buf.subarray(0, this.off);
        this.buf = Buffer.allocUnsafe(CHUNK_BYTES);
        this.off = 0;
      }
    }
    if (this.off > 0) yield this.buf.subarray(0, this.off);
    this.buf = Buffer.allocUnsafe(0);
  }
}
