// A growable byte writer for DNS messages with RFC 1035 name compression.
// One writer is reused per call site; `finish` copies the written bytes out.

import { nameToLabels, WireFormatError } from "./name.js";

const MAX_POINTER = 0x3fff;

export class WireWriter {
  private buf: Buffer = Buffer.allocUnsafe(4096);
  private pos = 0;
  private compress = false;
  /** lower-cased name suffix → offset where it was written */
  private readonly suffixes = new Map<string, number>();

  reset(compress: boolean): void {
    this.pos = 0;
    this.compress = compress;
    this.suffixes.clear();
  }

  get length(): number {
    return this.pos;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos + n > 0xffff) throw new WireFormatError("message larger than 65535 bytes");
    // Capped at 0xffff (not 0x10000) so the fast path above can never admit a 65536th byte.
    const next = Buffer.allocUnsafe(Math.min(0xffff, Math.max(this.buf.length * 2, this.pos + n)));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  u8(v: number): void {
    this.room(1);
    this.buf[this.pos++] = v;
  }

  u16(v: number): void {
    this.room(2);
    this.buf[this.pos++] = (v >>> 8) & 0xff;
    this.buf[this.pos++] = v & 0xff;
  }

  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32BE(v >>> 0, this.pos);
    this.pos += 4;
  }

  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** Writes a name in presentation form, compressed against earlier names when enabled. */
  name(name: string): void {
    const labels = nameToLabels(name);
    if (!this.compress) {
      for (const label of labels) {
        this.u8(label.length);
        this.bytes(label);
      }
      this.u8(0);
      return;
    }
    // Suffix keys are built from the text so "Example.COM" and "example.com" share a pointer.
    const keys = suffixKeys(labels);
    for (let i = 0; i < labels.length; i++) {
      const known = this.suffixes.get(keys[i]);
      if (known !== undefined) {
        this.u16(0xc000 | known);
        return;
      }
      if (this.pos <= MAX_POINTER) this.suffixes.set(keys[i], this.pos);
      this.u8(labels[i].length);
      this.bytes(labels[i]);
    }
    this.u8(0);
  }

  finish(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

function suffixKeys(labels: Uint8Array[]): string[] {
  const keys = new Array<string>(labels.length);
  let key = "";
  for (let i = labels.length - 1; i >= 0; i--) {
    // Length-prefixed so labels containing dots or NULs cannot collide; ASCII-only case folding.
    const label = labels[i];
    let text = String.fromCharCode(label.length);
    for (let j = 0; j < label.length; j++) {
      const c = label[j];
      text += String.fromCharCode(c >= 0x41 && c <= 0x5a ? c | 0x20 : c);
    }
    key = text + key;
    keys[i] = key;
  }
  return keys;
}
