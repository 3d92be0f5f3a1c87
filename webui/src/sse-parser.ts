// The text/event-stream format (WHATWG HTML, "Server-sent events"), parsed from text chunks that
// may split lines, fields and CRLF pairs anywhere. No DOM, no imports: the unit tests run it in Node.

export interface StreamEvent {
  event: string;
  data: string;
  id: string | null;
}

/** Splits a byte stream into SSE events (the WHATWG parsing rules, minus what the dashboard never needs). */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | null = null;
  private afterCr = false;
  /** The last `id:` seen, sent as Last-Event-ID on reconnect. */
  lastId: string | null = null;
  /** A `retry:` field from the server, ms. */
  retryMs: number | null = null;

  constructor(private readonly emit: (event: StreamEvent) => void) {}

  /** Drops a half-received event (the connection broke mid-event); keeps lastId for the resume. */
  reset(): void {
    this.buffer = "";
    this.data = [];
    this.event = "";
    this.id = null;
    this.afterCr = false;
  }

  push(text: string): void {
    if (text === "") return;
    // A chunk that ended in \r may have split a \r\n pair: its \n is not a second line end.
    if (this.afterCr && text.startsWith("\n")) text = text.slice(1);
    this.afterCr = false;
    this.buffer += text;
    const breaks = /\r\n|\r|\n/g;
    let start = 0;
    for (let m = breaks.exec(this.buffer); m !== null; m = breaks.exec(this.buffer)) {
      this.line(this.buffer.slice(start, m.index));
      start = m.index + m[0].length;
      this.afterCr = m[0] === "\r" && start === this.buffer.length;
    }
    this.buffer = this.buffer.slice(start);
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length > 0) this.emit({ event: this.event || "message", data: this.data.join("\n"), id: this.id });
      this.data = [];
      this.event = "";
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) {
      this.id = value;
      this.lastId = value;
    } else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}
