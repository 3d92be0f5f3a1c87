// Hand-built DNS packets for wire-layer tests: byte-level control that an encoder would never allow
// (pointers anywhere, lying counts, bad lengths), plus a small seeded PRNG shared by property tests.

export interface HeaderFields {
  id?: number;
  flags?: number;
  qd?: number;
  an?: number;
  ns?: number;
  ar?: number;
}

/** Appends bytes in wire order; every method returns `this` except the offset getters. */
export class PacketBuilder {
  private readonly parts: number[] = [];

  constructor(header: HeaderFields = {}) {
    this.u16(header.id ?? 0x1234).u16(header.flags ?? 0x0100);
    this.u16(header.qd ?? 0).u16(header.an ?? 0).u16(header.ns ?? 0).u16(header.ar ?? 0);
  }

  /** Offset where the next byte goes. */
  get here(): number {
    return this.parts.length;
  }

  u8(v: number): this {
    this.parts.push(v & 0xff);
    return this;
  }

  u16(v: number): this {
    return this.u8(v >>> 8).u8(v);
  }

  u32(v: number): this {
    return this.u16(Math.floor(v / 0x10000)).u16(v & 0xffff);
  }

  bytes(b: ArrayLike<number>): this {
    for (let i = 0; i < b.length; i++) this.u8(b[i]);
    return this;
  }

  /** Labels given as text (latin1) or raw bytes; `end` null/undefined writes the root byte, a number writes a pointer. */
  name(labels: (string | number[])[], end: number | null = null): this {
    for (const l of labels) {
      const raw = typeof l === "string" ? [...Buffer.from(l, "latin1")] : l;
      this.u8(raw.length).bytes(raw);
    }
    return end === null ? this.u8(0) : this.pointer(end);
  }

  pointer(offset: number): this {
    return this.u16(0xc000 | offset);
  }

  question(labels: string[], type = 1, klass = 1): this {
    return this.name(labels).u16(type).u16(klass);
  }

  /** Record header after the owner name; `rdata` writes the data and its length is patched in. */
  record(type: number, klass: number, ttl: number, rdata: (b: this) => void): this {
    this.u16(type).u16(klass).u32(ttl);
    const lengthAt = this.here;
    this.u16(0);
    rdata(this);
    const len = this.here - lengthAt - 2;
    this.parts[lengthAt] = (len >>> 8) & 0xff;
    this.parts[lengthAt + 1] = len & 0xff;
    return this;
  }

  /** Record with an explicit (possibly lying) RDLENGTH. */
  recordRaw(type: number, klass: number, ttl: number, rdlength: number, rdata: ArrayLike<number>): this {
    return this.u16(type).u16(klass).u32(ttl).u16(rdlength).bytes(rdata);
  }

  /** A root-owned OPT record. */
  opt(udpSize = 1232, ttl = 0, options: ArrayLike<number> = []): this {
    return this.u8(0).recordRaw(41, udpSize, ttl, options.length, options);
  }

  build(): Buffer {
    return Buffer.from(this.parts);
  }
}

/** Mulberry32: small, fast, deterministic; good enough for test inputs. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Integer in [lo, hi]. */
export function randInt(rnd: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rnd() * (hi - lo + 1));
}

export function randomBytes(rnd: () => number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}
