// Audit (admins): the audit trail of the management API, newest first (GET /api/audit): who (a user or
// a token, and how they proved it), from which address, which route (and plugin tag), how it ended
// (status and error code) and the summary line of the change. Filters by actor, method, tag, status,
// text and time range; "Older" appends the next page by its cursor; while following, entries arriving
// on GET /api/audit/stream that pass the filters are put on top as they happen (and the newest page is
// read again whenever the stream opens, for what was written while it was not).

import { useSignal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { errorText } from "../api";
import { filterProblem, loadAudit, METHODS, NO_AUDIT_FILTERS, passes, type AuditFilters, type AuditRow } from "../audit";
import { useLiveStream } from "../components/live";
import { Badge, Notice, toneOf, type Tone } from "../components/ui";
import { count, when } from "../format";

const PAGE = 100;
/** Entries the live stream may put on top between two draws. */
const LIVE_KEEP = 500;

function statusTone(status: number): Tone {
  if (status >= 500) return "error";
  if (status >= 400) return status === 401 || status === 403 || status === 429 ? "warn" : "error";
  return "ok";
}

function Rows({ rows }: { rows: AuditRow[] }) {
  return (
    <div class="table-wrap">
      <table class="stack audit" data-testid="audit-table">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Who</th>
            <th scope="col">Address</th>
            <th scope="col">Request</th>
            <th scope="col">Status</th>
            <th scope="col">Summary</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((e) => (
            <tr key={e.id} data-id={e.id} data-actor={e.actor} data-status={e.status}>
              <td class="nowrap" data-label="Time">
                <time dateTime={new Date(e.at_ms).toISOString()}>{when(e.at_ms)}</time>
              </td>
              <td data-label="Who">
                <span>
                  <span class="mono">{e.actor}</span> <span class="hint">via {e.via}</span>
                  {e.role && <span class="hint"> · {e.role}</span>}
                </span>
              </td>
              <td class="mono" data-label="Address">
                {e.address}
              </td>
              <td data-label="Request">
                <span class="mono audit-route" title={e.path}>
                  <strong>{e.method}</strong> {e.route}
                  {e.tag !== null && <span class="hint"> · {e.tag}</span>}
                </span>
              </td>
              <td class="nowrap" data-label="Status">
                <span>
                  <Badge tone={statusTone(e.status)}>{e.status}</Badge>
                  {e.code !== null && <span class="mono hint"> {e.code}</span>}
                </span>
              </td>
              <td class="audit-summary" data-label="Summary">
                {e.summary}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function AuditPage() {
  const form = useSignal<AuditFilters>(NO_AUDIT_FILTERS);
  const applied = useSignal<AuditFilters>(NO_AUDIT_FILTERS);
  const rows = useSignal<AuditRow[]>([]);
  const cursor = useSignal<string | null>(null);
  const loaded = useSignal(false);
  const busy = useSignal(false);
  const error = useSignal<string | null>(null);
  const problem = useSignal<string | null>(null);
  const follow = useSignal(true);
  // Only the answer of the newest read is shown (a filter change may overtake a slow read).
  const seq = useRef(0);
  /** Ids the stream put on top since the newest page read started. */
  const arrived = useRef(new Set<number>());

  /** Reads the newest page (`more` false) or the page after the oldest shown. */
  const load = async (more: boolean): Promise<void> => {
    const mine = ++seq.current;
    busy.value = true;
    try {
      const filters = applied.value;
      if (!more) arrived.current.clear();
      const page = await loadAudit(filters, PAGE, more ? cursor.value : null);
      if (mine !== seq.current) return;
      if (more) {
        const have = new Set(rows.value.map((r) => r.id));
        rows.value = [...rows.value, ...page.entries.filter((r) => !have.has(r.id))];
      } else {
        // Entries the stream brought while the page was read stay on top.
        const newest = page.entries[0]?.id ?? -1;
        rows.value = [...rows.value.filter((r) => arrived.current.has(r.id) && r.id > newest && passes(r, filters)), ...page.entries];
      }
      cursor.value = page.next_cursor;
      loaded.value = true;
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    } finally {
      if (mine === seq.current) busy.value = false;
    }
  };

  useEffect(() => {
    void load(false);
  }, [applied.value]);

  // New entries on top, each once (one may come both in a page read and on the stream).
  const stream = useLiveStream<AuditRow>(
    follow.value ? "api/audit/stream" : null,
    "audit",
    LIVE_KEEP,
    (fresh) => {
      const have = new Set(rows.peek().map((r) => r.id));
      const add = fresh.filter((r) => !have.has(r.id));
      for (const r of add) arrived.current.add(r.id);
      if (add.length > 0) rows.value = [...add, ...rows.peek()];
    },
    (e) => passes(e, applied.peek()),
  );

  // The stream has no ids to resume from: each time it (re)opens, the newest page is read again, so
  // what was written while it was down (or before it first opened) shows too.
  const streamState = stream.state.value;
  useEffect(() => {
    if (streamState === "open" && loaded.peek()) void load(false);
  }, [streamState]);

  const apply = (f: AuditFilters): void => {
    problem.value = filterProblem(f);
    if (problem.value === null) applied.value = { ...f };
  };
  const set = (k: keyof AuditFilters, v: string): void => {
    form.value = { ...form.value, [k]: v };
  };

  const f = form.value;
  const state = streamState;
  return (
    <section aria-labelledby="audit-title">
      <header class="page-head">
        <h1 id="audit-title">Audit</h1>
        <span class="hint">Changes made through the management API, and refused requests</span>
        {follow.value && (
          <span data-testid="audit-live">
            <Badge tone={toneOf(state)} title={stream.detail.value ?? undefined}>
              {state === "open" ? "live" : state}
            </Badge>
          </span>
        )}
      </header>
      <form class="filters" onSubmit={(e) => (e.preventDefault(), apply(form.value))} aria-label="Filter the audit trail">
        <label>
          Who <input type="search" value={f.actor} onInput={(e) => set("actor", e.currentTarget.value)} placeholder="user or token name" size={14} data-testid="audit-actor" />
        </label>
        <label>
          Method{" "}
          <select value={f.method} onChange={(e) => set("method", e.currentTarget.value)} data-testid="audit-method">
            <option value="">any</option>
            {METHODS.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
        <label>
          Plugin tag <input type="search" value={f.tag} onInput={(e) => set("tag", e.currentTarget.value)} size={12} data-testid="audit-tag" />
        </label>
        <label>
          Status <input value={f.status} onInput={(e) => set("status", e.currentTarget.value)} placeholder="403, 4xx" size={6} data-testid="audit-status" />
        </label>
        <label>
          Text <input type="search" value={f.q} onInput={(e) => set("q", e.currentTarget.value)} placeholder="in the summary" size={16} data-testid="audit-q" />
        </label>
        <label>
          From <input type="datetime-local" value={f.from} onInput={(e) => set("from", e.currentTarget.value)} data-testid="audit-from" />
        </label>
        <label>
          To <input type="datetime-local" value={f.to} onInput={(e) => set("to", e.currentTarget.value)} data-testid="audit-to" />
        </label>
        <button type="submit" class="primary" data-testid="audit-apply">
          Apply
        </button>
        <button type="button" onClick={() => ((form.value = NO_AUDIT_FILTERS), apply(NO_AUDIT_FILTERS))}>
          Clear
        </button>
      </form>
      <div class="toolbar">
        <button type="button" aria-pressed={follow.value} onClick={() => (follow.value = !follow.value)} data-testid="audit-follow" class={follow.value ? "primary" : undefined}>
          {follow.value ? "Stop following" : "Follow"}
        </button>
        <button type="button" onClick={() => void load(false)} disabled={busy.value}>
          Refresh
        </button>
        <span class="hint" data-testid="audit-count">
          {count(rows.value.length)} entries{loaded.value && cursor.value === null ? " (to the oldest kept)" : ""}
        </span>
      </div>
      {problem.value && <Notice tone="error">{problem.value}</Notice>}
      {error.value && <Notice tone="error">Could not read the audit trail: {error.value}</Notice>}
      {follow.value && state === "retrying" && stream.detail.value && <Notice tone="warn">Audit stream interrupted: {stream.detail.value}</Notice>}
      {follow.value && state === "closed" && stream.detail.value && <Notice tone="error">Audit stream closed: {stream.detail.value}</Notice>}
      {stream.dropped.value > 0 && <Notice tone="warn">{count(stream.dropped.value)} entries were skipped because this page fell behind the stream; Refresh reads them.</Notice>}
      {loaded.value && rows.value.length === 0 ? (
        <p class="hint" data-testid="audit-empty">
          No entries match the filters.
        </p>
      ) : (
        <Rows rows={rows.value} />
      )}
      {cursor.value !== null && (
        <button type="button" onClick={() => void load(true)} disabled={busy.value} data-testid="audit-older">
          Older
        </button>
      )}
    </section>
  );
}
