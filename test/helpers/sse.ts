// Reads a Server-Sent Events response from fetch() frame by frame, for tests of the SSE routes.

export interface SseFrame {
  event: string | null;
  id: string | null;
  data: string | null;
  /** Text of a comment frame (`: heartbeat`), without the colon. */
  comment: string | null;
}

function parseFrame(block: string): SseFrame {
  const frame: SseFrame = { event: null, id: null, data: null, comment: null };
  for (const line of block.split("\n")) {
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "") frame.comment = value;
    else if (field === "event") frame.event = value;
    else if (field === "id") frame.id = value;
    else if (field === "data") frame.data = frame.data === null ? value : `${frame.data}\n${value}`;
  }
  return frame;
}

export class SseStream {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  /** The one outstanding read; kept across timeouts so no chunk is lost. */
  private pending: ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]> | null = null;
  ended = false;

  constructor(
    readonly response: Response,
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    private readonly controller: AbortController,
  ) {}

  /** The next frame, or null when the stream ended; throws after `timeoutMs`. */
  async next(timeoutMs = 5000): Promise<SseFrame | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end !== -1) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        return parseFrame(block);
      }
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE frame within ${timeoutMs} ms`);
      this.pending ??= this.reader.read();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), left);
      });
      const result = await Promise.race([this.pending, timeout]).finally(() => clearTimeout(timer));
      if (result === "timeout") continue;
      this.pending = null;
      if (result.done) this.ended = true;
      else this.buffer += this.decoder.decode(result.value, { stream: true });
    }
  }

  /** Frames up to and including the first one `match` accepts. */
  async until(match: (f: SseFrame) => boolean, timeoutMs = 5000): Promise<SseFrame[]> {
    const deadline = Date.now() + timeoutMs;
    const seen: SseFrame[] = [];
    for (;;) {
      const frame = await this.next(Math.max(1, deadline - Date.now()));
      if (frame === null) throw new Error(`stream ended before the expected frame; saw ${JSON.stringify(seen.slice(-5))}`);
      seen.push(frame);
      if (match(frame)) return seen;
    }
  }

  /** Disconnects (the server sees the socket close). */
  async close(): Promise<void> {
    this.controller.abort();
    await this.reader.cancel().catch(() => undefined);
    await this.pending?.catch(() => undefined);
  }
}

/** Opens an SSE request with fetch; the caller checks `response.status` before reading. */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal });
  if (!response.body) throw new Error("response has no body");
  return new SseStream(response, response.body.getReader(), controller);
}

export const isHeartbeat = (f: SseFrame): boolean => f.comment !== null && f.comment.startsWith("heartbeat");
