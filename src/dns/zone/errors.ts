// The one error type the zone parser throws: what was wrong, and in which file (or snippet) and line.

export class ZoneError extends Error {
  /** File the problem is in, as named by the caller or the $INCLUDE; undefined for an inline snippet. */
  readonly source: string | undefined;
  /** 1-based line; 0 when the problem is not tied to a line (an unreadable file). */
  readonly line: number;
  readonly detail: string;

  constructor(detail: string, line: number, source?: string) {
    const where = [source, line > 0 ? `line ${line}` : undefined].filter((s) => s !== undefined).join(", ");
    super(where.length > 0 ? `${where}: ${detail}` : detail);
    this.name = "ZoneError";
    this.source = source;
    this.line = line;
    this.detail = detail;
  }
}

/** A problem inside one entry; the parser adds the file and, unless given here, the entry's line. */
export class EntryError extends Error {
  readonly line: number | undefined;
  constructor(message: string, line?: number) {
    super(message);
    this.name = "EntryError";
    this.line = line;
  }
}
