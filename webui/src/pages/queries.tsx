// Query log: a query recorder's records (GET records) with every filter of the route, cursor paging
// (older/newer), a live mode fed by the record stream (GET stream over the fetch-based SSE reader,
// which reconnects and resumes with Last-Event-ID), and each record's detail with its execution path.
// The filters live in the URL (#/queries?qname=…), so the Overview can open the log already filtered.
// A client the `clients` provider named shows by its name, with its address (and groups) on hover.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { errorText, pluginPath } from "../api";
import { ClientFilterFields } from "../components/client-filters";
import { useLiveStream } from "../components/live";
import { useNewest } from "../components/newest";
import { RecorderSelect } from "../components/recorder-select";
import { Badge, Notice, toneOf, type Tone } from "../components/ui";
import type { PluginInfo } from "../features";
import { clock, count, localInput, localMs, millis } from "../format";
import { currentRecorder, NO_FILTERS, outcomeText, passes, query, recorderGet, type Filters, type FullRecord, type RecordPage, type RecordRow } from "../recorder";
import { routeParams } from "../router";
import { RecordDetail } from "./record-detail";

const LIMITS = [20, 50, 100, 500];
/** Records kept on screen in live mode, and replayed when it starts. */
const LIVE_KEEP = 500;
const LIVE_TAIL = 50;

const STATUS: { value: Filters["status"]; label: string }[] = [
  { value: "", label: "any" },
  { value: "has_response", label: "answered" },
  { value: "error", label: "failed" },
  { value: "no_response", label: "no response" },
];

const KEYS = Object.keys(NO_FILTERS) as (keyof Filters)[];

const isStatus = (v: string): v is Filters["status"] => STATUS.some((s) => s.value === v) || v === "all";

function filtersFrom(params: URLSearchParams): Filters {
  const f: Filters = { ...NO_FILTERS };
  for (const k of KEYS) {
    const v = params.get(k);
    if (v === null) continue;
    if (k !== "status") f[k] = v;
    else if (isStatus(v)) f.status = v;
  }
  return f;
}

/** The form shows times as local date-times; the filters hold them as Unix ms. */
const toForm = (f: Filters): Filters => ({ ...f, since_ms: f.since_ms ? localInput(Number(f.since_ms)) : "", until_ms: f.until_ms ? localInput(Number(f.until_ms)) : "" });
const fromForm = (f: Filters): Filters => ({ ...f, since_ms: String(localMs(f.since_ms) ?? ""), until_ms: String(localMs(f.until_ms) ?? "") });

function outcomeTone(r: RecordRow): Tone {
  if (r.error !== null) return "error";
  if (!r.has_response) return "muted";
  return r.rcode === "NOERROR" ? "ok" : r.rcode === "NXDOMAIN" ? "warn" : toneOf(r.rcode ?? "");
}

function answerText(r: RecordRow): string {
  const first = r.answers_json[0];
  if (!first) return "";
  return `${first.rr_type} ${first.payload_text}${r.answers_json.length > 1 ? ` +${r.answers_json.length - 1}` : ""}`;
}

/** The client's name with its address on hover, or the address when it has no name. */
function ClientCell({ r }: { r: RecordRow }) {
  if (r.client_name === null) return <>{r.client_ip}</>;
  return (
    <span class="client-name" title={`${r.client_ip}${r.client_groups.length > 0 ? ` · ${r.client_groups.join(", ")}` : ""}`} data-address={r.client_ip}>
      {r.client_name}
    </span>
  );
}

function Rows({ rows, open, selected, showInstance }: { rows: RecordRow[]; open: (id: number) => void; selected: number | null; showInstance: boolean }) {
  return (
    <div class="table-wrap">
      <table class="records stack" data-testid="records-table">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Client</th>
            {showInstance && <th scope="col">Instance</th>}
            <th scope="col">Name</th>
            <th scope="col">Type</th>
            <th scope="col">Outcome</th>
            <th scope="col">Took</th>
            <th scope="col">Answer</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const q = r.questions_json[0];
            return (
              <tr key={r.id} data-id={r.id} data-qname={q?.name ?? ""} aria-selected={r.id === selected}>
                <td class="nowrap" data-label="Time">
                  <button type="button" class="link" onClick={() => open(r.id)} title={`Show query #${r.id} with its execution path`} data-testid="record-open">
                    {clock(r.created_at_ms, true)}
                  </button>
                </td>
                <td class="mono" data-label="Client">
                  <ClientCell r={r} />
                </td>
                {showInstance && (
                  <td class="mono" data-label="Instance">
                    {r.instance ?? ""}
                  </td>
                )}
                <td class="mono" data-label="Name">
                  {q?.name ?? "—"}
                </td>
                <td data-label="Type">{q?.qtype ?? ""}</td>
                <td data-label="Outcome">
                  <Badge tone={outcomeTone(r)} title={r.error ?? undefined}>
                    {outcomeText(r)}
                  </Badge>
                </td>
                <td class="nowrap" data-label="Took">
                  {millis(r.elapsed_us / 1000)}
                </td>
                <td class="mono" data-label="Answer">
                  {answerText(r)}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function QueriesPage({ sources }: { sources: PluginInfo[] }) {
  const tag = currentRecorder(sources);
  const applied = useSignal<Filters>(filtersFrom(routeParams.value));
  const form = useSignal<Filters>(toForm(applied.value));
  const limit = useSignal(50);
  // Cursors of the pages before this one: [] on the newest page.
  const trail = useSignal<string[]>([]);
  const cursor = useSignal<string | null>(null);
  const page = useSignal<RecordPage | null>(null);
  const error = useSignal<string | null>(null);
  const busy = useSignal(false);
  const live = useSignal(false);
  const liveRows = useSignal<FullRecord[]>([]);
  const selected = useSignal<number | null>(null);

  // Another link to this page (from the Overview) brings its own filters.
  useEffect(() => {
    const f = filtersFrom(routeParams.value);
    applied.value = f;
    form.value = toForm(f);
  }, [routeParams.value]);

  // A Clear and a limit change start two loads; the first may answer last, and must not replace the second's rows.
  const newest = useNewest();
  const loadPage = async (): Promise<void> => {
    if (tag === null) return;
    const isNewest = newest();
    busy.value = true;
    try {
      const answer = await recorderGet<RecordPage>(tag, "records", query(applied.value, { limit: limit.value, ...(cursor.value ? { cursor: cursor.value } : {}) }));
      if (!isNewest()) return;
      page.value = answer;
      error.value = null;
    } catch (err) {
      if (isNewest()) error.value = errorText(err);
    } finally {
      if (isNewest()) busy.value = false;
    }
  };

  useEffect(() => {
    if (!live.value) void loadPage();
  }, [tag, applied.value, limit.value, cursor.value, live.value]);

  // Live: the stream's records that pass the filters in force, newest first.
  useEffect(() => {
    liveRows.value = [];
  }, [live.value, applied.value]);
  const stream = useLiveStream<FullRecord>(
    live.value ? `${pluginPath(tag ?? "", "stream")}?tail=${LIVE_TAIL}` : null,
    "record",
    LIVE_KEEP,
    (fresh) => (liveRows.value = [...fresh, ...liveRows.peek()].slice(0, LIVE_KEEP)),
    (full) => passes(full, applied.peek()),
    JSON.stringify(applied.value),
  );
  const liveState = stream.state;
  const liveDetail = stream.detail;
  const dropped = stream.dropped;

  const apply = (f: Filters): void => {
    trail.value = [];
    cursor.value = null;
    applied.value = fromForm(f);
  };
  const older = (): void => {
    const next = page.value?.next_cursor;
    if (!next) return;
    trail.value = [...trail.value, cursor.value ?? ""];
    cursor.value = next;
  };
  const newer = (): void => {
    const back = trail.value[trail.value.length - 1];
    trail.value = trail.value.slice(0, -1);
    cursor.value = back ? back : null;
  };
  const set = (k: keyof Filters, v: string): void => {
    form.value = { ...form.value, [k]: v };
  };

  if (tag === null) return null;
  const rows = live.value ? liveRows.value.map((f) => f.record) : (page.value?.records ?? []);
  // The answering instance matters only when a shared store holds several.
  const showInstance = new Set(rows.map((r) => r.instance ?? "")).size > 1;
  const f = form.value;
  return (
    <section aria-labelledby="queries-title">
      <header class="page-head">
        <h1 id="queries-title">Query log</h1>
        {live.value && (
          <span data-testid="live-state">
            <Badge tone={toneOf(liveState.value)} title={liveDetail.value ?? undefined}>
              {liveState.value === "open" ? "live" : liveState.value}
            </Badge>
          </span>
        )}
      </header>
      <form class="filters" onSubmit={(e) => (e.preventDefault(), apply(form.value))} aria-label="Filter the records">
        <RecorderSelect sources={sources} current={tag} />
        <label>
          Name <input type="search" value={f.qname} onInput={(e) => set("qname", e.currentTarget.value)} placeholder="example.com" data-testid="q-qname" />
        </label>
        <label>
          Client address <input type="search" value={f.client_ip} onInput={(e) => set("client_ip", e.currentTarget.value)} placeholder="192.168.1." data-testid="q-client" />
        </label>
        <ClientFilterFields name={f.client_name} group={f.group} onName={(v) => set("client_name", v)} onGroup={(v) => set("group", v)} idPrefix="q" />
        <label>
          Type <input value={f.qtype} onInput={(e) => set("qtype", e.currentTarget.value)} placeholder="A, AAAA…" size={7} data-testid="q-qtype" />
        </label>
        <label>
          Rcode <input value={f.rcode} onInput={(e) => set("rcode", e.currentTarget.value)} placeholder="NXDOMAIN" size={10} data-testid="q-rcode" />
        </label>
        <label>
          Status{" "}
          <select value={f.status} onChange={(e) => set("status", e.currentTarget.value)} data-testid="q-status">
            {STATUS.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Matched <input value={f.matcher_tag} onInput={(e) => set("matcher_tag", e.currentTarget.value)} placeholder="matcher tag" size={12} data-testid="q-matcher" />
        </label>
        <label>
          From <input type="datetime-local" value={f.since_ms} onInput={(e) => set("since_ms", e.currentTarget.value)} data-testid="q-since" />
        </label>
        <label>
          To <input type="datetime-local" value={f.until_ms} onInput={(e) => set("until_ms", e.currentTarget.value)} data-testid="q-until" />
        </label>
        <button type="submit" class="primary" data-testid="q-apply">
          Apply
        </button>
        <button type="button" onClick={() => ((form.value = { ...NO_FILTERS }), apply(NO_FILTERS))}>
          Clear
        </button>
      </form>
      <div class="toolbar">
        <button type="button" aria-pressed={live.value} onClick={() => (live.value = !live.value)} data-testid="live-toggle" class={live.value ? "primary" : undefined}>
          {live.value ? "Stop live" : "Live"}
        </button>
        {!live.value && (
          <>
            <button type="button" onClick={newer} disabled={trail.value.length === 0 || busy.value} data-testid="records-newer">
              ← Newer
            </button>
            <button type="button" onClick={older} disabled={!page.value?.next_cursor || busy.value} data-testid="records-older">
              Older →
            </button>
            <label>
              Per page{" "}
              <select value={String(limit.value)} data-testid="records-limit" onChange={(e) => ((limit.value = Number(e.currentTarget.value)), (trail.value = []), (cursor.value = null))}>
                {LIMITS.map((n) => (
                  <option key={n} value={String(n)}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
            <button type="button" onClick={() => void loadPage()} disabled={busy.value}>
              Refresh
            </button>
          </>
        )}
        <span class="hint" data-testid="records-range">
          {live.value
            ? `${count(rows.length)} newest matching records (up to ${LIVE_KEEP} kept)`
            : `page ${trail.value.length + 1}, ${count(rows.length)} records${page.value?.next_cursor ? "" : rows.length > 0 ? " (the oldest)" : ""}`}
        </span>
      </div>
      {error.value && <Notice tone="error">Could not read the records: {error.value}</Notice>}
      {live.value && liveState.value === "retrying" && liveDetail.value && <Notice tone="warn">Record stream interrupted: {liveDetail.value}</Notice>}
      {live.value && liveState.value === "closed" && liveDetail.value && <Notice tone="error">Record stream closed: {liveDetail.value}</Notice>}
      {dropped.value > 0 && <Notice tone="warn">{count(dropped.value)} records were skipped because this page fell behind the stream.</Notice>}
      {selected.value !== null && <RecordDetail tag={tag} id={selected.value} onClose={() => (selected.value = null)} />}
      {rows.length === 0 ? (
        <p class="hint" data-testid="records-empty">
          {live.value ? "Waiting for queries that match the filters…" : "No records match the filters."}
        </p>
      ) : (
        <Rows rows={rows} open={(id) => (selected.value = id)} selected={selected.value} showInstance={showInstance} />
      )}
    </section>
  );
}
