// System: health (GET /api/health), build (GET /api/build), system figures (GET /api/system, polled,
// with CPU and memory charted over the time this page is open), the reload status, and the Upgrade
// card when the build has the upgrade routes and the principal is an admin.

import { useSignal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import type { ComponentChildren } from "preact";
import type uPlot from "uplot";
import { ApiFailure, api, errorText } from "../api";
import { Chart } from "../components/chart";
import { useEvery } from "../components/every";
import { Badge, Facts, Notice, toneOf } from "../components/ui";
import { capabilities } from "../features";
import { duration, shortVersion, when } from "../format";
import type { BuildAnswer, BuildRecord, Health, SystemRecord } from "../shapes";
import { can } from "../session";
import { restarts, UpgradeCard } from "./upgrade";

const POLL_MS = 3000;
/** Samples kept for the chart: an hour at one per POLL_MS. */
const SAMPLES = 1200;

/** /api/health answers 503 with the same record while not ready; that is a state to show, not an error. */
async function health(): Promise<Health> {
  try {
    return await api<Health>("api/health");
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 503 && typeof err.body.status === "string") return err.body as unknown as Health;
    throw err;
  }
}

export function SystemPage() {
  const h = useSignal<Health | null>(null);
  const build = useSignal<BuildRecord | null>(null);
  const sys = useSignal<SystemRecord | null>(null);
  const error = useSignal<string | null>(null);
  const series = useSignal<uPlot.AlignedData>([[], [], []]);

  // CPU and memory are samples over time, not actor state: the one place besides the Overview's moving window that polls.
  const poll = async (): Promise<void> => {
    try {
      const [hh, ss] = await Promise.all([health(), api<SystemRecord>("api/system")]);
      h.value = hh;
      sys.value = ss;
      error.value = null;
      const [t, cpu, mem] = series.value as [number[], number[], number[]];
      const keep = (a: number[], v: number): number[] => [...a, v].slice(-SAMPLES);
      series.value = [keep(t, Date.now() / 1000), keep(cpu, ss.process_cpu_percent), keep(mem, ss.process_memory_mb)];
    } catch (err) {
      error.value = errorText(err);
    }
  };
  useEffect(() => {
    void poll();
  }, []);
  useEvery(POLL_MS, poll);

  // Read again after an upgrade restarted the service into another release.
  useEffect(() => {
    void api<BuildAnswer>("api/build").then(
      (b) => (build.value = b.build),
      (err: unknown) => (error.value = errorText(err)),
    );
  }, [restarts.value]);

  const hv = h.value;
  const s = sys.value;
  const b = build.value;
  const r = s?.reload;
  return (
    <section aria-labelledby="system-title">
      <header class="page-head">
        <h1 id="system-title">System</h1>
        {hv && (
          <span data-testid="health-status">
            <Badge tone={hv.status === "ok" ? "ok" : "error"}>{hv.status === "ok" ? "healthy" : "not ready"}</Badge>
          </span>
        )}
      </header>
      {error.value && <Notice tone="error">{error.value}</Notice>}
      <div class="cards">
        <article class="card" aria-labelledby="health-title">
          <h2 id="health-title">Health</h2>
          {hv && (
            <Facts
              testId="health-facts"
              rows={[
                ["Status", <Badge tone={toneOf(hv.status)}>{hv.status}</Badge>],
                ["Version", <span data-testid="health-version">{hv.version}</span>],
                ...Object.entries(hv.checks).map(([k, v]): [string, ComponentChildren] => [`Check ${k}`, <Badge tone={toneOf(v)}>{v}</Badge>]),
                ["Plugins", `${hv.plugins.total} (${hv.plugins.servers} servers)`],
                ["Uptime", duration(hv.uptime_ms)],
              ]}
            />
          )}
        </article>
        <article class="card" aria-labelledby="reload-title">
          <h2 id="reload-title">Reload</h2>
          {r && (
            <Facts
              testId="reload-facts"
              rows={[
                ["Status", <Badge tone={toneOf(r.status)}>{r.status}</Badge>],
                ["Last started", when(r.last_started_ms)],
                ["Last success", when(r.last_success_ms)],
                ["Running version", <code>{shortVersion(r.running_version)}</code>],
                ["Last error", r.last_error ?? "none"],
              ]}
            />
          )}
        </article>
        <article class="card" aria-labelledby="process-title">
          <h2 id="process-title">Process</h2>
          {s && (
            <Facts
              testId="system-facts"
              rows={[
                ["Platform", `${s.os} / ${s.arch}`],
                ["CPU", `${s.process_cpu_percent.toFixed(1)} %`],
                ["Memory", `${s.process_memory_mb.toFixed(1)} MB of ${s.system_memory_total_mb.toLocaleString()} MB`],
                ["Configuration", <span class="mono">{s.config_path}</span>],
              ]}
            />
          )}
        </article>
        <article class="card" aria-labelledby="build-title">
          <h2 id="build-title">Build</h2>
          {b && (
            <Facts
              testId="build-facts"
              rows={[
                ["Version", <span data-testid="build-version">{b.version}</span>],
                ["Bundle", b.bundle],
                ["Features", b.enabled_features.join(", ")],
                ...Object.entries(b.supported_plugins).map(([kind, types]): [string, ComponentChildren] => [`${kind} (${types.length})`, types.join(", ")]),
              ]}
            />
          )}
        </article>
      </div>
      <article class="card wide" aria-labelledby="usage-title">
        <h2 id="usage-title">CPU and memory while this page is open</h2>
        <Chart
          label="Process CPU percent and memory in MB over time"
          data={series.value}
          series={[
            { label: "CPU %", stroke: "#2563eb", scale: "cpu", format: (v) => `${v.toFixed(1)} %` },
            { label: "Memory MB", stroke: "#c2410c", scale: "mb", format: (v) => `${v.toFixed(0)} MB` },
          ]}
        />
      </article>
      {capabilities.value.upgrade && can("admin") && <UpgradeCard />}
    </section>
  );
}
