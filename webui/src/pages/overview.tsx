// Overview: what the DNS service did over a time range, from a query recorder's stats routes —
// queries over time, answered/blocked/failed shares, top clients and domains, rcode and qtype
// distributions, latency percentiles and histogram. A client and a domain filter apply to every
// panel (they are the routes' client_ip and qname parameters; with a `clients` provider also
// client_name and group), and every figure links to the Query log with the same filters. A client
// the provider named shows by its name among the top clients, with its address on hover.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { errorText } from "../api";
import { BarList, ShareBar, type Part } from "../components/bars";
import { ClientFilterFields } from "../components/client-filters";
import { Chart } from "../components/chart";
import { useEvery } from "../components/every";
import { useNewest } from "../components/newest";
import { RecorderSelect } from "../components/recorder-select";
import { Facts, Notice } from "../components/ui";
import { capabilities, plugins, type PluginInfo } from "../features";
import { clock, count, localInput, millis, when } from "../format";
import { currentRecorder, query, recorderGet, type Distribution, type Latency, type PluginRow, type Timeseries, type TopClients } from "../recorder";
import { href } from "../router";
import { filterText, NO_FILTER, TopClientList, type PanelFilter, type PickWhat } from "./overview-clients";
import { PRESETS, windowOf, type Preset, type Window } from "./overview-range";

interface Data {
  window: Window;
  series: Timeseries;
  plugins: PluginRow[];
  clients: TopClients;
  domains: Distribution;
  rcode: Distribution;
  qtype: Distribution;
  latency: Latency;
  blocked: number;
}

/** What counts as blocked: the `reject` builtin ran, or a chosen matcher matched. */
const REJECT = "builtin:reject";
const BLOCKED_KEY = "sluice.overview.blocked";
const REFRESH_MS = 30_000;
const TOP = 10;

function storedBlocked(): string {
  try {
    return localStorage.getItem(BLOCKED_KEY) ?? REJECT;
  } catch {
    return REJECT;
  }
}

/** Histogram edges as labels: "< 1 ms", "1–5 ms", …, "≥ 1000 ms". */
function bucketLabel(i: number, edges: (number | null)[]): string {
  const hi = edges[i];
  const lo = i === 0 ? null : edges[i - 1];
  if (hi === null || hi === undefined) return `≥ ${lo ?? 0} ms`;
  return lo === null || lo === undefined ? `< ${hi} ms` : `${lo}–${hi} ms`;
}

/** `byName`: top clients one row per client name (with a `clients` provider), else per address. */
async function load(tag: string, win: Window, filter: PanelFilter, blockedBy: string, byName: boolean): Promise<Data> {
  const base = { ...filter, since_ms: String(win.sinceMs), until_ms: String(win.untilMs) };
  const get = <T,>(sub: string, extra: Record<string, string | number> = {}): Promise<T> => recorderGet<T>(tag, sub, query(base, extra));
  const blockedMatcher = blockedBy.startsWith("matcher:") ? blockedBy.slice("matcher:".length) : null;
  const [series, pluginStats, clients, domains, rcode, qtype, latency, blockedRows] = await Promise.all([
    // The chart's buckets end at `until`; its own span comes from `buckets`, not from since_ms.
    recorderGet<Timeseries>(tag, "stats/timeseries", query({ ...filter, until_ms: String(win.untilMs) }, { bucket: win.bucket, buckets: win.buckets })),
    get<{ rows: PluginRow[] }>("stats/plugins"),
    get<TopClients>("stats/top_clients", { limit: TOP, ...(byName ? { by: "name" } : {}) }),
    get<Distribution>("stats/top_qnames", { limit: TOP }),
    get<Distribution>("stats/rcode"),
    get<Distribution>("stats/qtype"),
    get<Latency>("stats/latency", { slow_limit: 5 }),
    blockedMatcher === null ? Promise.resolve(null) : get<Distribution>("stats/qtype", { matcher_tag: blockedMatcher }),
  ]);
  const blocked = blockedRows !== null ? blockedRows.sample_size : (pluginStats.rows.find((r) => r.kind === "builtin" && r.tag === "reject")?.query_total ?? 0);
  return { window: win, series, plugins: pluginStats.rows, clients, domains, rcode, qtype, latency, blocked };
}

function shares(d: Data): { parts: Part[]; total: number } {
  const total = d.rcode.sample_size;
  const bucket = (key: string): number => d.rcode.rows.find((r) => r.key === key)?.count ?? 0;
  const failed = bucket("_ERROR");
  const silent = bucket("_NO_RESPONSE");
  const blocked = Math.min(d.blocked, total - failed - silent);
  return {
    total,
    parts: [
      { key: "answered", label: "Answered", count: Math.max(0, total - blocked - failed - silent), colour: "var(--ok)" },
      { key: "blocked", label: "Blocked", count: blocked, colour: "var(--warn)" },
      { key: "error", label: "Failed", count: failed, colour: "var(--error)" },
      { key: "no_response", label: "No response", count: silent, colour: "var(--fg-muted)" },
    ],
  };
}

function Panels({ d, pick, log }: { d: Data; pick: (what: PickWhat, key: string) => void; log: (extra: Record<string, string>) => string }) {
  const s = shares(d);
  const xs = d.series.points.map((p) => p.bucket_ms / 1000);
  const edges = d.latency.histogram.map((h) => h.lt_ms);
  const lat = d.latency;
  return (
    <>
      <div class="cards">
        <article class="card" aria-labelledby="ov-total">
          <h2 id="ov-total">Queries</h2>
          <p class="big" data-testid="overview-total" data-count={s.total}>
            <a href={log({})}>{count(s.total)}</a>
          </p>
          <p class="hint">
            {when(d.window.sinceMs)} – {when(d.window.untilMs)}
          </p>
        </article>
        <article class="card" aria-labelledby="ov-shares">
          <h2 id="ov-shares">Outcomes</h2>
          <ShareBar parts={s.parts} total={s.total} testId="overview-shares" />
        </article>
        <article class="card" aria-labelledby="ov-latency">
          <h2 id="ov-latency">Latency</h2>
          <Facts
            testId="latency-summary"
            rows={[
              ["average", millis(lat.avg_ms)],
              ["p50", millis(lat.p50_ms)],
              ["p95", millis(lat.p95_ms)],
              ["p99", millis(lat.p99_ms)],
              ["max", millis(lat.max_ms)],
            ]}
          />
        </article>
      </div>
      <article class="card wide" aria-labelledby="ov-series">
        <h2 id="ov-series">Queries over time</h2>
        {d.window.chartClipped && <p class="hint">The chart shows the last 720 hours of the range; the other panels cover all of it.</p>}
        <Chart
          label={`Queries per ${d.window.bucket}: ${count(d.series.sample_size)} in the chart's span`}
          data={[xs, d.series.points.map((p) => p.total), d.series.points.map((p) => p.error_count), d.series.points.map((p) => p.no_response_count)]}
          series={[
            { label: "Queries", stroke: "#2563eb" },
            { label: "Failed", stroke: "#dc2626" },
            { label: "No response", stroke: "#6b7280" },
          ]}
        />
        <Chart
          label="Latency over time: average and 95th percentile"
          height={160}
          // An empty bucket has no latency: a gap, not a zero.
          data={[xs, d.series.points.map((p) => (p.total > 0 ? p.avg_ms : null)), d.series.points.map((p) => (p.total > 0 ? p.p95_ms : null))]}
          series={[
            { label: "avg ms", stroke: "#16a34a", format: (v) => `${v.toFixed(1)} ms` },
            { label: "p95 ms", stroke: "#ca8a04", format: (v) => `${v.toFixed(1)} ms` },
          ]}
        />
      </article>
      <div class="cards wide-gap">
        <article class="card" aria-labelledby="ov-clients">
          <h2 id="ov-clients">Top clients</h2>
          <TopClientList rows={d.clients.rows} pick={pick} />
        </article>
        <article class="card" aria-labelledby="ov-domains">
          <h2 id="ov-domains">Top domains</h2>
          <BarList testId="top-domains" rows={d.domains.rows} onPick={(k) => pick("qname", k)} pickLabel="Filter every panel by domain" />
        </article>
        <article class="card" aria-labelledby="ov-rcode">
          <h2 id="ov-rcode">Response codes</h2>
          <BarList
            testId="rcodes"
            rows={d.rcode.rows.map((r) => ({ ...r, label: <a href={log({ rcode: r.key })}>{r.key === "_ERROR" ? "failed" : r.key === "_NO_RESPONSE" ? "no response" : r.key}</a> }))}
          />
        </article>
        <article class="card" aria-labelledby="ov-qtype">
          <h2 id="ov-qtype">Query types</h2>
          <BarList testId="qtypes" rows={d.qtype.rows.map((r) => ({ ...r, label: <a href={log({ qtype: r.key })}>{r.key}</a> }))} />
        </article>
        <article class="card" aria-labelledby="ov-hist">
          <h2 id="ov-hist">Latency histogram</h2>
          <BarList
            testId="latency-histogram"
            rows={lat.histogram.map((h, i) => ({ key: String(h.lt_ms), label: bucketLabel(i, edges), count: h.count, share: lat.sample_size > 0 ? h.count / lat.sample_size : 0 }))}
          />
        </article>
        <article class="card" aria-labelledby="ov-slow">
          <h2 id="ov-slow">Slowest domains</h2>
          {lat.slow_top.length === 0 ? (
            <p class="hint">No queries in this range.</p>
          ) : (
            <div class="table-wrap">
              <table data-testid="slow-top">
                <thead>
                  <tr>
                    <th scope="col">Domain</th>
                    <th scope="col">Queries</th>
                    <th scope="col">avg</th>
                    <th scope="col">max</th>
                  </tr>
                </thead>
                <tbody>
                  {lat.slow_top.map((r) => (
                    <tr key={r.qname}>
                      <td class="mono">
                        <a href={log({ qname: r.qname })}>{r.qname}</a>
                      </td>
                      <td>{count(r.count)}</td>
                      <td class="nowrap">{millis(r.avg_ms)}</td>
                      <td class="nowrap">{millis(r.max_ms)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </article>
      </div>
    </>
  );
}

export function OverviewPage({ sources }: { sources: PluginInfo[] }) {
  const tag = currentRecorder(sources);
  // With a clients provider the top clients are its clients by name.
  const byName = capabilities.value.clients.length > 0;
  const preset = useSignal<Preset>("1h");
  const customSince = useSignal(localInput(Date.now() - 3_600_000));
  const customUntil = useSignal("");
  // The inputs; the filter in force (they apply on submit, not on each keystroke).
  const form = useSignal<PanelFilter>(NO_FILTER);
  const filter = useSignal<PanelFilter>(NO_FILTER);
  const blockedBy = useSignal(storedBlocked());
  const data = useSignal<Data | null>(null);
  const error = useSignal<string | null>(null);
  const loadedAt = useSignal<number | null>(null);

  // A refresh under way when the filter changes may answer after the filtered one: only the newest is shown.
  const newest = useNewest();
  const refresh = async (): Promise<void> => {
    if (tag === null) return;
    const isNewest = newest();
    const win = windowOf(preset.value, Date.now(), customSince.value, customUntil.value);
    if (typeof win === "string") {
      error.value = win;
      return;
    }
    try {
      const answer = await load(tag, win, filter.value, blockedBy.value, byName);
      if (!isNewest()) return;
      data.value = answer;
      loadedAt.value = Date.now();
      error.value = null;
    } catch (err) {
      if (isNewest()) error.value = errorText(err);
    }
  };

  useEffect(() => {
    void refresh();
  }, [tag, preset.value, filter.value, blockedBy.value, byName]);
  // A range that ends now moves on; a custom one stays where it was put.
  useEvery(REFRESH_MS, () => (preset.value === "custom" ? undefined : refresh()));

  const apply = (next: PanelFilter): void => {
    form.value = next;
    filter.value = next;
  };
  const pick = (what: PickWhat, key: string): void => apply({ ...filter.value, [what]: key });
  const set = (k: keyof PanelFilter, v: string): void => {
    form.value = { ...form.value, [k]: v };
  };
  const chooseBlocked = (v: string): void => {
    blockedBy.value = v;
    try {
      localStorage.setItem(BLOCKED_KEY, v);
    } catch {
      // Not kept across visits without storage.
    }
  };
  const log = (extra: Record<string, string>): string => {
    const d = data.value;
    return href("queries", { ...filter.value, ...(d ? { since_ms: String(d.window.sinceMs), until_ms: String(d.window.untilMs) } : {}), ...extra });
  };
  const matchers = plugins.value.filter((p) => p.kind === "matcher").map((p) => p.tag);
  const f = filter.value;
  const active = Object.values(f).some((v) => v !== "");

  if (tag === null) return null;
  return (
    <section aria-labelledby="overview-title">
      <header class="page-head">
        <h1 id="overview-title">Overview</h1>
        <span class="hint" data-testid="overview-updated">
          {loadedAt.value !== null ? `updated ${clock(loadedAt.value)}` : "loading…"}
        </span>
      </header>
      <div class="toolbar">
        <RecorderSelect sources={sources} current={tag} />
        <div class="segmented" role="group" aria-label="Time range">
          {PRESETS.map((p) => (
            <button key={p.id} type="button" aria-pressed={preset.value === p.id} data-range={p.id} onClick={() => (preset.value = p.id)}>
              {p.label}
            </button>
          ))}
        </div>
        {preset.value === "custom" && (
          <form class="inline-form" onSubmit={(e) => (e.preventDefault(), void refresh())} aria-label="Custom range">
            <label>
              From <input type="datetime-local" value={customSince.value} onInput={(e) => (customSince.value = e.currentTarget.value)} data-testid="range-since" />
            </label>
            <label>
              To <input type="datetime-local" value={customUntil.value} onInput={(e) => (customUntil.value = e.currentTarget.value)} data-testid="range-until" />
            </label>
            <button type="submit">Show</button>
          </form>
        )}
        <button type="button" onClick={() => void refresh()}>
          Refresh
        </button>
      </div>
      <form
        class="toolbar"
        onSubmit={(e) => (e.preventDefault(), apply({ client_ip: form.value.client_ip.trim(), client_name: form.value.client_name.trim(), group: form.value.group, qname: form.value.qname.trim() }))}
        aria-label="Filter every panel"
      >
        <label>
          Client <input type="search" value={form.value.client_ip} onInput={(e) => set("client_ip", e.currentTarget.value)} placeholder="192.168.1." data-testid="filter-client" />
        </label>
        <ClientFilterFields name={form.value.client_name} group={form.value.group} onName={(v) => set("client_name", v)} onGroup={(v) => set("group", v)} idPrefix="filter" />
        <label>
          Domain <input type="search" value={form.value.qname} onInput={(e) => set("qname", e.currentTarget.value)} placeholder="example.com" data-testid="filter-domain" />
        </label>
        <button type="submit" class="primary">
          Apply
        </button>
        {active && (
          <button type="button" onClick={() => apply(NO_FILTER)}>
            Clear filter
          </button>
        )}
        <label>
          Blocked means{" "}
          <select value={blockedBy.value} onChange={(e) => chooseBlocked(e.currentTarget.value)} data-testid="blocked-by">
            <option value={REJECT}>a rule answered with reject</option>
            {matchers.map((m) => (
              <option key={m} value={`matcher:${m}`}>
                matcher {m} matched
              </option>
            ))}
          </select>
        </label>
      </form>
      {active && (
        <p class="hint" data-testid="overview-filter">
          Every panel shows only queries {filterText(f)}.
        </p>
      )}
      {error.value && <Notice tone="error">Could not read the statistics: {error.value}</Notice>}
      {data.value && <Panels d={data.value} pick={pick} log={log} />}
    </section>
  );
}
