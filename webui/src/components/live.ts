// A live list fed by an SSE route (the Logs page's log stream, the Query log's record stream): opens
// the stream over the fetch-based reader while `path` is set, parses the items of one event type,
// keeps at most `keep` that arrived since the last draw, and hands them over newest first once per
// DRAW_MS (one render per batch, not per item). `dropped` counts what the server skipped because the
// page fell behind.

import { useSignal, type Signal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { openStream, type StreamState } from "../sse";

const DRAW_MS = 100;

export interface LiveStream {
  state: Signal<StreamState>;
  /** Why the state changed (an error, the wait before the next attempt), or null. */
  detail: Signal<string | null>;
  dropped: Signal<number>;
}

/**
 * `path` null: no stream. A new `path` (or `key`) reopens it. `accept` filters items as they arrive;
 * `onBatch` receives each batch newest first.
 */
export function useLiveStream<T>(path: string | null, event: string, keep: number, onBatch: (fresh: T[]) => void, accept: (item: T) => boolean = () => true, key = ""): LiveStream {
  const state = useSignal<StreamState>("connecting");
  const detail = useSignal<string | null>(null);
  const dropped = useSignal(0);
  const latest = useRef({ onBatch, accept });
  latest.current = { onBatch, accept };

  useEffect(() => {
    if (path === null) return;
    dropped.value = 0;
    let pending: T[] = [];
    const draw = window.setInterval(() => {
      if (pending.length === 0) return;
      const fresh = pending.reverse();
      pending = [];
      latest.current.onBatch(fresh);
    }, DRAW_MS);
    const stream = openStream(path, {
      onEvent(ev) {
        if (ev.event === event) {
          const item = JSON.parse(ev.data) as T;
          if (!latest.current.accept(item)) return;
          pending.push(item);
          if (pending.length > keep) pending.splice(0, pending.length - keep);
        } else if (ev.event === "dropped") {
          dropped.value += (JSON.parse(ev.data) as { dropped: number }).dropped;
        }
      },
      onState(s, why) {
        state.value = s;
        detail.value = why ?? null;
      },
    });
    return () => {
      stream.close();
      clearInterval(draw);
    };
  }, [path, event, keep, key]);

  return { state, detail, dropped };
}
