// A focused protocol buffers reader for v2ray's geosite.dat / geoip.dat (app/router/config.proto):
// fields are read one at a time from a byte range, unknown fields are skipped by wire type, and a
// nested message is handed out as a sub-range, so an unselected list is skipped without decoding.
// Every read is bounds-checked: a truncated or corrupt file is a ProtobufError, never a crash.

export class ProtobufError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtobufError";
  }
}

export const WireType = { varint: 0, fixed64: 1, len: 2, fixed32: 5 } as const;

/** One field: its number and wire type; `value` for varints, `start`/`end` for length-delimited ones. */
export interface Field {
  number: number;
  wire: number;
  value: number;
  start: number;
  end: number;
}

export class ProtoReader {
  private pos: number;
  /** Reused by next(): callers read it before the following call. */
  private readonly field: Field = { number: 0, wire: 0, value: 0, start: 0, end: 0 };

  constructor(
    readonly buf: Uint8Array,
    start = 0,
    private readonly end = buf.length,
  ) {
    this.pos = start;
  }

  /** A reader over a length-delimited field's bytes. */
  sub(f: Field): ProtoReader {
    return new ProtoReader(this.buf, f.start, f.end);
  }

  /** Reads a varint up to 2^53 (larger values are refused: nothing in these files needs them). */
  private varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError(`truncated varint at byte ${this.pos}`);
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (!Number.isSafeInteger(result)) throw new ProtobufError(`varint too large at byte ${this.pos}`);
        return result;
      }
      scale *= 128;
    }
    throw new ProtobufError(`varint longer than 10 bytes at byte ${this.pos}`);
  }

  /** The next field, or null at the end of the range. Unknown contents are not decoded, only skipped. */
  next(): Field | null {
    if (this.pos >= this.end) return null;
    const key = this.varint();
    const f = this.field;
    f.number = Math.floor(key / 8);
    f.wire = key & 7;
    f.value = 0;
    if (f.number === 0) throw new ProtobufError(`field number 0 at byte ${this.pos}`);
    switch (f.wire) {
      case WireType.varint:
        f.value = this.varint();
        break;
      case WireType.fixed64:
        this.skip(8);
        break;
      case WireType.fixed32:
        this.skip(4);
        break;
      case WireType.len: {
        const len = this.varint();
        f.start = this.pos;
        this.skip(len);
        f.end = this.pos;
        break;
      }
      default:
        throw new ProtobufError(`unsupported wire type ${f.wire} (field ${f.number}) at byte ${this.pos}`);
    }
    return f;
  }

  private skip(n: number): void {
    if (n > this.end - this.pos) throw new ProtobufError(`field runs past the end of its message (byte ${this.pos}, ${n} bytes)`);
    this.pos += n;
  }

  /** A length-delimited field as UTF-8 text. */
  text(f: Field): string {
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + f.start, f.end - f.start).toString("utf8");
  }

  /** A length-delimited field's bytes (a view, not a copy). */
  bytes(f: Field): Uint8Array {
    return this.buf.subarray(f.start, f.end);
  }
}

/** Checks a field's wire type against the schema; a mismatch means the file is not what it claims. */
export function expectWire(f: Field, wire: number, what: string): void {
  if (f.wire !== wire) throw new ProtobufError(`${what} (field ${f.number}) has wire type ${f.wire}, expected ${wire}`);
}
