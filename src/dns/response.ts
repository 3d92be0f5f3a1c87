// A response travels as wire bytes with a lazily built view. Passing an upstream answer through,
// or serving a cached one, never decodes it; only a plugin that restructures a message does.

import { FLAG } from "./constants.js";
import { decodeMessage, encodeMessage, messageRcode, type Message } from "./message.js";
import { indexMessage, scanMessage, wireRcode, type WireIndex } from "./view.js";

export class DnsResponse {
  private wire: Buffer | null;
  private msg: Message | null;
  private idx: WireIndex | null = null;
  /** TYPE offset of the OPT record once known (-1: none); undefined until validated or indexed. */
  private optAt: number | undefined = undefined;

  private constructor(wire: Buffer | null, msg: Message | null) {
    this.wire = wire;
    this.msg = msg;
  }

  /** Takes ownership of `wire`; callers must not change the bytes afterwards. */
  static fromWire(wire: Buffer): DnsResponse {
    return new DnsResponse(wire, null);
  }

  static fromMessage(msg: Message): DnsResponse {
    return new DnsResponse(null, msg);
  }

  toWire(): Buffer {
    if (!this.wire) this.wire = encodeMessage(this.msg as Message);
    return this.wire;
  }

  /** Checks the structure without building the index (pass-through answers). Throws when malformed. */
  validate(): void {
    if (this.optAt === undefined && this.idx === null) this.optAt = scanMessage(this.toWire());
  }

  /** Structural index of the wire form (built once). */
  get index(): WireIndex {
    if (!this.idx) this.idx = indexMessage(this.toWire());
    return this.idx;
  }

  /** Decoded, read-only view. Use `edit` to change the message. */
  get message(): Message {
    if (!this.msg) this.msg = decodeMessage(this.wire as Buffer);
    return this.msg;
  }

  /** Decodes (if needed) and hands out the message for changes; the wire form is rebuilt later. */
  edit(): Message {
    const m = this.message;
    this.wire = null;
    this.idx = null;
    this.optAt = undefined;
    return m;
  }

  get flags(): number {
    if (this.msg) return this.msg.flags;
    const w = this.wire as Buffer;
    return (w[2] << 8) | w[3];
  }

  get id(): number {
    if (this.msg) return this.msg.id;
    const w = this.wire as Buffer;
    return (w[0] << 8) | w[1];
  }

  get truncated(): boolean {
    return (this.flags & FLAG.TC) !== 0;
  }

  get rcode(): number {
    if (this.msg) return messageRcode(this.msg);
    const w = this.wire as Buffer;
    if (((w[10] << 8) | w[11]) === 0) return w[3] & 0x0f;
    if (this.optAt === undefined) {
      if (this.idx !== null) return wireRcode(w, this.idx);
      this.optAt = scanMessage(w);
    }
    return this.optAt < 0 ? w[3] & 0x0f : (w[this.optAt + 4] << 4) | (w[3] & 0x0f);
  }

  get answerCount(): number {
    if (this.msg) return this.msg.answers.length;
    const w = this.wire as Buffer;
    return (w[6] << 8) | w[7];
  }

  /** A copy that can be changed independently (used when a branch works on a cloned context). */
  clone(): DnsResponse {
    if (this.wire) return DnsResponse.fromWire(Buffer.from(this.wire));
    return DnsResponse.fromWire(encodeMessage(this.msg as Message));
  }
}
