// Server-Sent Events over fetch(). The dashboard's session cookie authenticates a stream like every
// other request (fetch sends it same-origin), so EventSource would do for that; fetch() stays because it
// shares the one request path of api.ts (X-Requested-With, a 401 showing the sign-in form with its
// reason, a 403 stopping the stream with the server's message) and gives this reader what EventSource
// hides: the status and error body of a refused stream, Last-Event-ID resume after reconnects with
// backoff, and a watchdog for a connection that went silent.

import { request, ApiFailure } from "./api";
import { SseParser, type StreamEvent } from "./sse-parser";

export type { StreamEvent };

export type StreamState = "connecting" | "open" | "retrying" | "closed";

export interface StreamHandlers {
  onEvent(event: StreamEvent): void;
  /** Connection changes; `detail` says why (the error, or the wait before the next attempt). */
  onState(state: StreamState, detail?: string): void;
}

export interface StreamOptions {
  /** No byte for this long (heartbeats included) counts as a dead connection. */
  silenceMs?: number;
  firstRetryMs?: number;
  maxRetryMs?: number;
}

export interface EventStream {
  close(): void;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/**
 * Opens `path` as an event stream and keeps it open until close(): reconnects after errors and
 * after the server ends the stream. A 401 signs the tab out and stops; another 4xx stops too
 * (the request itself is wrong, retrying cannot help).
 */
export function openStream(path: string, handlers: StreamHandlers, options: StreamOptions = {}): EventStream {
  const silenceMs = options.silenceMs ?? 45_000;
  const firstRetry = options.firstRetryMs ?? 1000;
  const maxRetry = options.maxRetryMs ?? 15_000;
  const closed = new AbortController();
  const parser = new SseParser((e) => handlers.onEvent(e));

  const connectOnce = async (): Promise<"ended" | "fatal"> => {
    const attempt = new AbortController();
    const stop = (): void => attempt.abort();
    closed.signal.addEventListener("abort", stop, { once: true });
    let watchdog = 0;
    const arm = (): void => {
      clearTimeout(watchdog);
      watchdog = window.setTimeout(stop, silenceMs);
    };
    try {
      handlers.onState("connecting");
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (parser.lastId !== null) headers["last-event-id"] = parser.lastId;
      parser.reset();
      arm();
      const res = await request(path, { headers, signal: attempt.signal });
      if (!res.ok || res.body === null) {
        const text = await res.text().catch(() => "");
        let message = `HTTP ${res.status}`;
        try {
          message = (JSON.parse(text) as { message?: string }).message ?? message;
        } catch {
          // Not the JSON error shape: keep the status.
        }
        if (res.status >= 400 && res.status < 500) {
          handlers.onState("closed", message);
          return "fatal";
        }
        throw new Error(message);
      }
      handlers.onState("open");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        arm();
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
      }
      return "ended";
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 401) {
        handlers.onState("closed", "sign-in needed");
        return "fatal";
      }
      if (!closed.signal.aborted) handlers.onState("retrying", err instanceof Error && err.name !== "AbortError" ? err.message : "connection lost");
      return "ended";
    } finally {
      clearTimeout(watchdog);
      closed.signal.removeEventListener("abort", stop);
    }
  };

  void (async () => {
    let delay = firstRetry;
    while (!closed.signal.aborted) {
      const opened = Date.now();
      if ((await connectOnce()) === "fatal") return;
      if (closed.signal.aborted) break;
      // A stream that stayed up a while was healthy: start the backoff again.
      if (Date.now() - opened > 30_000) delay = firstRetry;
      const wait = parser.retryMs ?? delay;
      handlers.onState("retrying", `reconnecting in ${Math.round(wait / 1000)} s`);
      await sleep(wait, closed.signal);
      delay = Math.min(delay * 2, maxRetry);
    }
    handlers.onState("closed");
  })();

  return { close: () => closed.abort() };
}
