// Logs: the live log stream (GET /api/logs/stream) with a minimum level, a text filter and pause.
// Entries arrive over the fetch-based SSE reader (components/live.ts); the newest are shown first.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { useLiveStream } from "../components/live";
import { clock } from "../format";
import { Badge, Notice, toneOf } from "../components/ui";
import type { LogEntry } from "../shapes";

const LEVELS = ["trace", "debug", "info", "warn", "error"] as const;
type Level = (typeof LEVELS)[number];

/** Entries kept on screen, and held while paused. */
const KEEP = 1000;
/** Entries replayed when the stream opens. */
const TAIL = 200;

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
  const path = `api/logs/stream?tail=${TAIL}&level=${level.value}`;

  // A new level starts a new list.
  useEffect(() => {
    entries.value = [];
    held.value = [];
  }, [path]);
  const { state, detail, dropped } = useLiveStream<LogEntry>(path, "log", KEEP, (fresh) => {
    if (paused.peek()) held.value = [...fresh, ...held.peek()].slice(0, KEEP);
    else entries.value = [...fresh, ...entries.peek()].slice(0, KEEP);
  });

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
