// Domain names on the wire and in text.
// Text form: presentation format without the trailing dot ("www.example.com"); the root is "".
// Bytes outside printable ASCII and the characters `.` `\` are escaped as \DDD / \. / \\.

export class WireFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WireFormatError";
  }
}

const MAX_NAME_WIRE = 255;
const MAX_LABEL = 63;

/** Result slot reused by readName so the hot path allocates only the string. */
export interface NameRead {
  name: string;
  /** Offset just after the name in the record that contains it (after the first pointer, if any). */
  end: number;
}

function labelNeedsEscape(buf: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c <= 0x20 || c >= 0x7f || c === 0x2e || c === 0x5c) return true;
  }
  return false;
}

function escapeLabel(buf: Uint8Array, start: number, end: number): string {
  let out = "";
  for (let i = start; i < end; i++) {
    const c = buf[i];
    if (c === 0x2e || c === 0x5c) out += "\\" + String.fromCharCode(c);
    else if (c <= 0x20 || c >= 0x7f) out += "\\" + String(c).padStart(3, "0");
    else out += String.fromCharCode(c);
  }
  return out;
}

/**
 * Reads a possibly compressed name at `offset`. Rejects reserved label types, labels running past
 * `limit`, names over 255 bytes, and pointers that do not point strictly backwards (which also
 * rules out loops).
 */
export function readName(buf: Buffer, offset: number, limit: number = buf.length): NameRead {
  let pos = offset;
  let end = -1;
  let wireLength = 0;
  // Every pointer must land before the smallest position visited so far: strictly backwards.
  let floor = offset;
  let name = "";
  for (;;) {
    if (pos >= limit) throw new WireFormatError("name runs past the end of the message");
    const len = buf[pos];
    if (len === 0) {
      if (end < 0) end = pos + 1;
      break;
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= limit) throw new WireFormatError("truncated compression pointer");
      const target = ((len & 0x3f) << 8) | buf[pos + 1];
      if (end < 0) end = pos + 2;
      if (target >= floor) throw new WireFormatError("compression pointer does not point backwards");
      floor = target;
      pos = target;
      continue;
    }
    if (kind !== 0) throw new WireFormatError("reserved label type");
    if (len > MAX_LABEL) throw new WireFormatError("label longer than 63 bytes");
    const start = pos + 1;
    const stop = start + len;
    if (stop > limit) throw new WireFormatError("label runs past the end of the message");
    wireLength += len + 1;
    if (wireLength >= MAX_NAME_WIRE) throw new WireFormatError("name longer than 255 bytes");
    const label = labelNeedsEscape(buf, start, stop) ? escapeLabel(buf, start, stop) : buf.toString("latin1", start, stop);
    name = name.length === 0 ? label : name + "." + label;
    pos = stop;
  }
  return { name, end };
}

/** Skips a name without decoding it; same checks as readName. Returns the offset after it. */
export function skipName(buf: Buffer, offset: number, limit: number = buf.length): number {
  let pos = offset;
  let end = -1;
  let wireLength = 0;
  let floor = offset;
  for (;;) {
    if (pos >= limit) throw new WireFormatError("name runs past the end of the message");
    const len = buf[pos];
    if (len === 0) return end < 0 ? pos + 1 : end;
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= limit) throw new WireFormatError("truncated compression pointer");
      const target = ((len & 0x3f) << 8) | buf[pos + 1];
      if (end < 0) end = pos + 2;
      if (target >= floor) throw new WireFormatError("compression pointer does not point backwards");
      floor = target;
      pos = target;
      continue;
    }
    if (kind !== 0) throw new WireFormatError("reserved label type");
    if (len > MAX_LABEL) throw new WireFormatError("label longer than 63 bytes");
    wireLength += len + 1;
    if (wireLength >= MAX_NAME_WIRE) throw new WireFormatError("name longer than 255 bytes");
    pos += len + 1;
    if (pos > limit) throw new WireFormatError("label runs past the end of the message");
  }
}

/** True when `text` ends with a dot that is not escaped (`a\\.` ends with one, `a\.` does not). */
function hasTrailingDot(text: string): boolean {
  if (!text.endsWith(".")) return false;
  let slashes = 0;
  for (let i = text.length - 2; i >= 0 && text.charCodeAt(i) === 0x5c; i--) slashes++;
  return slashes % 2 === 0;
}

const NON_LATIN1 = /[\u0100-\uffff]/;

/** Splits presentation text into raw label bytes, honouring \. \\ and \DDD escapes. */
export function nameToLabels(name: string): Uint8Array[] {
  let text = name;
  if (hasTrailingDot(text)) text = text.slice(0, -1);
  if (text.length === 0) return [];
  if (!text.includes("\\")) {
    // Buffer.from(.., "latin1") would silently keep only the low byte of each character.
    if (NON_LATIN1.test(text)) throw new WireFormatError(`non-latin1 character in name '${name}'`);
    const parts = text.split(".");
    const labels: Uint8Array[] = new Array<Uint8Array>(parts.length);
    let total = 1;
    for (let i = 0; i < parts.length; i++) {
      const label = Buffer.from(parts[i], "latin1");
      if (label.length === 0) throw new WireFormatError(`empty label in name '${name}'`);
      if (label.length > MAX_LABEL) throw new WireFormatError(`label longer than 63 bytes in '${name}'`);
      total += label.length + 1;
      labels[i] = label;
    }
    if (total > MAX_NAME_WIRE) throw new WireFormatError(`name longer than 255 bytes: '${name}'`);
    return labels;
  }
  const labels: Uint8Array[] = [];
  let current: number[] = [];
  let total = 1;
  const flush = (): void => {
    if (current.length === 0) throw new WireFormatError(`empty label in name '${name}'`);
    if (current.length > MAX_LABEL) throw new WireFormatError(`label longer than 63 bytes in '${name}'`);
    total += current.length + 1;
    labels.push(Uint8Array.from(current));
    current = [];
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === 0x5c) {
      const next = text.slice(i + 1, i + 4);
      if (/^\d{3}$/.test(next)) {
        const value = Number(next);
        if (value > 255) throw new WireFormatError(`bad escape in name '${name}'`);
        current.push(value);
        i += 3;
      } else if (i + 1 < text.length) {
        current.push(text.charCodeAt(i + 1) & 0xff);
        i += 1;
      } else {
        throw new WireFormatError(`dangling escape in name '${name}'`);
      }
    } else if (ch === 0x2e) {
      flush();
    } else {
      if (ch > 0xff) throw new WireFormatError(`non-latin1 character in name '${name}'`);
      current.push(ch);
    }
  }
  flush();
  if (total > MAX_NAME_WIRE) throw new WireFormatError(`name longer than 255 bytes: '${name}'`);
  return labels;
}

/** Canonical form used as a key and by matchers: lower-case, no trailing dot. */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return hasTrailingDot(lower) ? lower.slice(0, -1) : lower;
}

/** Fully qualified presentation form with the trailing dot ("." for the root). */
export function fqdn(name: string): string {
  return name.length === 0 ? "." : hasTrailingDot(name) ? name : name + ".";
}

/** Validates a name typed by an operator; returns the error text or null. */
export function checkName(name: string): string | null {
  try {
    nameToLabels(name);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
