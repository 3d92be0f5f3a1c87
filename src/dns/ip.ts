// IP addresses as bytes: strict text parsing (no zone ids, no shorthand IPv4) and formatting.

export function parseIPv4(text: string): Uint8Array | null {
  // Hand-rolled (no split, no regex): client addresses are parsed on the query path.
  if (text.length < 7 || text.length > 15) return null;
  const out = new Uint8Array(4);
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || part > 3) return null;
      out[part++] = value;
      value = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits > 0 && value === 0) return null; // leading zero
      value = value * 10 + (c - 0x30);
      if (++digits > 3 || value > 255) return null;
    } else {
      return null;
    }
  }
  return part === 4 ? out : null;
}

export function parseIPv6(text: string): Uint8Array | null {
  if (text.length < 2 || text.length > 45 || !/^[0-9a-fA-F:.]+$/.test(text)) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const groups = (s: string): string[] => (s.length === 0 ? [] : s.split(":"));
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  const words: number[] = [];
  const push = (list: string[], allowV4Last: boolean): boolean => {
    for (let i = 0; i < list.length; i++) {
      const g = list[i];
      if (allowV4Last && i === list.length - 1 && g.includes(".")) {
        const v4 = parseIPv4(g);
        if (!v4) return false;
        words.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return false;
        words.push(parseInt(g, 16));
      }
    }
    return true;
  };
  if (!push(head, halves.length === 1)) return null;
  const headWords = words.length;
  if (!push(tail, true)) return null;
  const tailWords = words.length - headWords;
  if (halves.length === 1) {
    if (words.length !== 8) return null;
  } else {
    if (headWords + tailWords > 7) return null;
    words.splice(headWords, 0, ...new Array<number>(8 - headWords - tailWords).fill(0));
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[i * 2] = words[i] >> 8;
    out[i * 2 + 1] = words[i] & 0xff;
  }
  return out;
}

/** 4 bytes for IPv4, 16 for IPv6, null when the text is neither. */
export function parseIP(text: string): Uint8Array | null {
  return text.includes(":") ? parseIPv6(text) : parseIPv4(text);
}

export function formatIP(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  // RFC 5952 §5: IPv4-mapped addresses keep the dotted quad (the form Node's sockets report too).
  if (unmapIPv4(bytes) !== bytes) return `::ffff:${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((bytes[i] << 8) | bytes[i + 1]);
  // RFC 5952: compress the longest run (length ≥ 2) of zero words, the first one on ties.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** ::ffff:a.b.c.d → a.b.c.d; anything else unchanged. */
export function unmapIPv4(bytes: Uint8Array): Uint8Array {
  if (bytes.length !== 16) return bytes;
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return bytes;
  if (bytes[10] !== 0xff || bytes[11] !== 0xff) return bytes;
  return bytes.subarray(12, 16);
}

/** Zeroes every bit after the first `bits`. */
export function maskIP(bytes: Uint8Array, bits: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    out[i] &= keep === 8 ? 0xff : (0xff << (8 - keep)) & 0xff;
  }
  return out;
}
