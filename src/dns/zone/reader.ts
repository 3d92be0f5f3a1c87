// A cursor over one record's RDATA tokens with the field readers every type parser uses.
// Running out of tokens reports the type's usage line ("MX needs a preference and an exchange").

import { EntryError } from "./errors.js";
import { intField, ttlField, zoneName, type ZoneName } from "./fields.js";
import { decodeText, type Token } from "./lexer.js";

export class RdataReader {
  private pos = 0;

  constructor(
    private readonly tokens: readonly Token[],
    readonly origin: ZoneName,
    /** The type's mnemonic, used in messages. */
    readonly typeName: string,
    /** What the type needs, said when fields are missing. */
    readonly usage: string,
    /** Line of the entry, for problems not tied to a token. */
    readonly line: number,
  ) {}

  get remaining(): number {
    return this.tokens.length - this.pos;
  }

  peek(): Token | undefined {
    return this.tokens[this.pos];
  }

  next(): Token {
    const t = this.tokens[this.pos];
    if (t === undefined) throw new EntryError(this.usage, this.line);
    this.pos++;
    return t;
  }

  fail(message: string, token?: Token): never {
    throw new EntryError(`${this.typeName} ${message}`, token?.line ?? this.line);
  }

  name(): Buffer {
    return zoneName(this.next(), this.origin).wire;
  }

  u8(what: string): number {
    return intField(this.next(), 0xff, `${this.typeName} ${what}`);
  }

  u16(what: string): number {
    return intField(this.next(), 0xffff, `${this.typeName} ${what}`);
  }

  u32(what: string): number {
    return intField(this.next(), 0xffffffff, `${this.typeName} ${what}`);
  }

  /** A duration field (SOA timers) that, like a TTL, may use units. */
  duration(what: string): number {
    return ttlField(this.next(), `${this.typeName} ${what}`);
  }

  /** One token decoded as text, without a length limit. */
  text(): Buffer {
    const t = this.next();
    try {
      return decodeText(t.text);
    } catch (err) {
      if (err instanceof EntryError) throw new EntryError(err.message, t.line);
      throw err;
    }
  }

  /** One <character-string>: at most 255 bytes. */
  charString(what: string): Buffer {
    const t = this.peek();
    const bytes = this.text();
    if (bytes.length > 255) this.fail(`${what} is ${bytes.length} bytes; a string holds at most 255`, t);
    return bytes;
  }

  /** All remaining tokens as one hex string (blanks inside are allowed). */
  hexRest(what: string): Buffer {
    if (this.remaining === 0) throw new EntryError(this.usage, this.line);
    const first = this.peek();
    let hex = "";
    while (this.remaining > 0) hex += this.next().text;
    if (!/^[0-9a-fA-F]*$/.test(hex) || hex.length % 2 !== 0) this.fail(`${what} must be an even number of hex digits`, first);
    return Buffer.from(hex, "hex");
  }

  /** All remaining tokens as one base64 string. */
  base64Rest(what: string): Buffer {
    if (this.remaining === 0) throw new EntryError(this.usage, this.line);
    const first = this.peek();
    let text = "";
    while (this.remaining > 0) text += this.next().text;
    return base64Field(text, () => this.fail(`${what} is not valid base64`, first));
  }

  /** Called after the type parser: anything left over is a mistake. */
  end(): void {
    const t = this.peek();
    if (t !== undefined) this.fail(`has unexpected data '${t.text}' after its last field`, t);
  }
}

export function base64Field(text: string, onError: () => never): Buffer {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) onError();
  return Buffer.from(text, "base64");
}
