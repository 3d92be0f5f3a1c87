// Logs: the live log stream (GET /api/logs/stream) with a minimum level, a text filter and pause.
// Entries arrive over the fetch-based SSE reader (src/sse.ts); the newest are shown first.

import { useSignal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { openStream, type StreamState } from "../sse";
import { clock } from "../format";
import { Badge, Notice, toneOf } from "../components/ui";

interface LogEntry {
  id: number;
  time_ms: number;
  level: string;
  target: string;
  message: string;
  fields: Record<string, unknown>;
}

const LEVELS = ["trace", "debug", "info", "warn", "error"] as const;
type Level = (typeof LEVELS)[number];

/** Entries kept on screen, and held while paused. */
const KEEP = 1000;
/** Entries replayed when the stream opens. */
const TAIL = 200;
/** How often arrived entries are drawn (one render per batch, not per entry). */
const DRAW_MS = 100;

const LEVEL_TONE: Record<string, "muted" | "info" | "warn" | "error"> = { trace: "muted", debug: "muted", info: "info", warn: "warn", error: "error", fatal: "error" };

function fieldsText(fields: Record<string, unknown>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
}

export function LogsPage() {
  const level = useSignal<Level>("info");
  const paused = useSignal(false);
  const query = useSignal("");
  const entries = useSignal<LogEntry[]>([]);
  const held = useSignal<LogEntry[]>([]);
  const state = useSignal<StreamState>("connecting");
  const detail = useSignal<string | null>(null);
  const dropped = useSignal(0);
  const pending = useRef<LogEntry[]>([]);

  useEffect(() => {
    entries.value = [];
    held.value = [];
    dropped.value = 0;
    pending.current = [];
    const draw = window.setInterval(() => {
      if (pending.current.length === 0) return;
      const fresh = pending.current.reverse();
      pending.current = [];
      if (paused.peek()) held.value = [...fresh, ...held.peek()].slice(0, KEEP);
      else entries.value = [...fresh, ...entries.peek()].slice(0, KEEP);
    }, DRAW_MS);
    const stream = openStream(`api/logs/stream?tail=${TAIL}&level=${level.value}`, {
      onEvent(ev) {
        if (ev.event === "log") {
          pending.current.push(JSON.parse(ev.data) as LogEntry);
          if (pending.current.length > KEEP) pending.current.splice(0, pending.current.length - KEEP);
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
  }, [level.value]);

  const resume = (): void => {
    entries.value = [...held.value, ...entries.value].slice(0, KEEP);
    held.value = [];
    paused.value = false;
  };

  const needle = query.value.trim().toLowerCase();
  const shown = needle === "" ? entries.value : entries.value.filter((e) => `${e.target} ${e.message} ${fieldsText(e.fields)}`.toLowerCase().includes(needle));
  const stateText = paused.value ? "paused" : state.value === "open" ? "live" : state.value;

  return (
    <section aria-labelledby="logs-title">
      <header class="page-head">
        <h1 id="logs-title">Logs</h1>
        <span data-testid="stream-state">
          <Badge tone={paused.value ? "warn" : toneOf(state.value)} title={detail.value ?? undefined}>
            {stateText}
          </Badge>
        </span>
      </header>
      <form class="toolbar" onSubmit={(e) => e.preventDefault()}>
        <label>
          Minimum level{" "}
          <select value={level.value} onChange={(e) => (level.value = (e.currentTarget).value as Level)} data-testid="log-level">
            {LEVELS.map((l) => (
              <option key={l} value={l}>
                {l}
              </option>
            ))}
          </select>
        </label>
        <label>
          Filter{" "}
          <input type="search" value={query.value} onInput={(e) => (query.value = (e.currentTarget).value)} placeholder="text in target, message or fields" />
        </label>
        {paused.value ? (
          <button type="button" class="primary" onClick={resume} data-testid="log-pause">
            Resume{held.value.length > 0 ? ` (${held.value.length} new)` : ""}
          </button>
        ) : (
          <button type="button" onClick={() => (paused.value = true)} data-testid="log-pause">
            Pause
          </button>
        )}
        <button type="button" onClick={() => ((entries.value = []), (held.value = []))}>
          Clear
        </button>
      </form>
      {state.value === "retrying" && detail.value && <Notice tone="warn">Log stream interrupted: {detail.value}</Notice>}
      {state.value === "closed" && detail.value && <Notice tone="error">Log stream closed: {detail.value}</Notice>}
      {dropped.value > 0 && <Notice tone="warn">{dropped.value} entries were dropped because this page fell behind the stream.</Notice>}
      <p class="hint">
        Showing {shown.length} of the newest {entries.value.length} entries at level {level.value} or above (newest first; up to {KEEP} are kept).
      </p>
      <ol class="log" data-testid="log-list" aria-live="off">
        {shown.map((e) => (
          <li key={e.id} class={`log-${e.level}`} data-level={e.level}>
            <time dateTime={new Date(e.time_ms).toISOString()}>{clock(e.time_ms, true)}</time>
            <Badge tone={LEVEL_TONE[e.level] ?? "muted"}>{e.level}</Badge>
            <span class="log-target">{e.target}</span>
            <span class="log-msg">{e.message}</span>
            {Object.keys(e.fields).length > 0 && <code class="log-fields">{fieldsText(e.fields)}</code>}
          </li>
        ))}
      </ol>
    </section>
  );
}
