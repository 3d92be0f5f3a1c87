// A cron plugin's jobs (GET .../jobs/status): schedule or interval, next run, the run in progress and
// the latest manual result, with "Run now" (POST .../jobs/<name>/run). A refusal (409: the job already
// has an active run; 503: the manual queue is full or the plugin is stopping) is shown at its job.
// "Run now" needs the operator role.

import { useSignal } from "@preact/signals";
import { useRef } from "preact/hooks";
import { api, errorText, pluginPath, refusalText, send } from "../api";
import { useActorLoad } from "../actors";
import { useEvery } from "../components/every";
import { Badge, Facts, Notice, type Tone } from "../components/ui";
import { clock, relative, when } from "../format";
import { can } from "../session";
import type { CronJobsStatus, CronJobStatus, CronRunAccepted } from "../shapes";

type ManualResult = NonNullable<CronJobStatus["last_manual_run"]>;

type Note = { tone: Tone; text: string };

const RESULT_TONE: Record<string, Tone> = { completed: "ok", completed_with_errors: "warn", failed: "error", cancelled: "muted" };
const STATE_TONE: Record<string, Tone> = { idle: "muted", pending: "warn", running: "info" };

const words = (status: string): string => status.replaceAll("_", " ");

/** "every 10 min", "every 1 h": an interval in its largest whole unit. */
function every(ms: number): string {
  const units: [string, number][] = [["d", 86_400_000], ["h", 3_600_000], ["min", 60_000], ["s", 1000]];
  for (const [unit, size] of units) if (ms % size === 0) return `every ${ms / size} ${unit}`;
  return `every ${ms} ms`;
}

function ResultText({ r }: { r: ManualResult | null }) {
  if (r === null) return <>none yet</>;
  return (
    <>
      <Badge tone={RESULT_TONE[r.status] ?? "muted"}>{words(r.status)}</Badge> run #{r.run_id}, {when(r.completed_at_ms)}
      {r.executor_error_count > 0 && `, ${r.executor_error_count} executor error${r.executor_error_count === 1 ? "" : "s"}`}
    </>
  );
}

export function CronJobs({ tag }: { tag: string }) {
  const jobs = useSignal<Record<string, CronJobStatus> | null>(null);
  const error = useSignal<string | null>(null);
  const now = useSignal(Date.now());
  const notes = useSignal<Record<string, Note>>({});
  /** Jobs whose "Run now" request is on its way. */
  const asking = useSignal<readonly string[]>([]);
  /** Manual runs started from this page (job → run_id) whose result has not been read yet. */
  const awaited = useRef(new Map<string, number>());

  const note = (job: string, n: Note): void => {
    notes.value = { ...notes.value, [job]: n };
  };

  const load = async (): Promise<void> => {
    try {
      const out = await api<CronJobsStatus>(pluginPath(tag, "jobs/status"));
      jobs.value = out.jobs;
      error.value = null;
      for (const [job, id] of awaited.current) {
        const r = out.jobs[job]?.last_manual_run;
        if (out.jobs[job] === undefined) awaited.current.delete(job);
        else if (r && r.run_id >= id) {
          awaited.current.delete(job);
          note(job, { tone: RESULT_TONE[r.status] ?? "muted", text: `Run #${r.run_id} finished: ${words(r.status)}.` });
        }
      }
    } catch (err) {
      error.value = errorText(err);
    }
  };

  // Loaded once, then again when this plugin's actors change (a run starts or ends): no polling.
  useActorLoad(tag, (id) => id.includes(`/plugin:${tag}/`), load);
  // The countdowns tick here; nothing is asked of the server.
  useEvery(1000, () => {
    now.value = Date.now();
  });

  const run = async (job: string): Promise<void> => {
    asking.value = [...asking.value, job];
    try {
      const out = await send<CronRunAccepted>("POST", pluginPath(tag, `jobs/${encodeURIComponent(job)}/run`));
      awaited.current.set(job, out.run_id);
      note(job, { tone: "info", text: `Run #${out.run_id} accepted; its result appears here when it ends.` });
    } catch (err) {
      note(job, { tone: "error", text: refusalText(err) });
    } finally {
      asking.value = asking.value.filter((j) => j !== job);
      await load();
    }
  };

  const list = jobs.value;
  return (
    <div class="control" data-testid={`cron-${tag}`}>
      {error.value && <Notice tone="error">{error.value}</Notice>}
      {list === null && !error.value && <p class="hint">Loading jobs…</p>}
      {list !== null && (
        <ul class="jobs">
          {Object.entries(list).map(([name, j]) => {
            const state = j.current_run?.status ?? "idle";
            const n = notes.value[name];
            return (
              <li key={name} class="job" data-job={name} data-state={state}>
                <div class="job-head">
                  <span class="mono job-name">{name}</span>
                  <span data-testid="job-state">
                    <Badge tone={STATE_TONE[state] ?? "muted"}>{state}</Badge>
                  </span>
                  {can("operator") && (
                    <button type="button" class="small" onClick={() => void run(name)} disabled={asking.value.includes(name)} aria-label={`Run job ${name} of ${tag} now`}>
                      Run now
                    </button>
                  )}
                </div>
                <Facts
                  rows={[
                    ["Schedule", j.schedule !== null ? <code>{j.schedule}</code> : j.interval_ms !== null ? every(j.interval_ms) : "—"],
                    ["Next run", j.next_run_ms === null ? "—" : `${when(j.next_run_ms)} (${relative(j.next_run_ms, now.value)})`],
                    ["Current run", j.current_run === null ? "none" : `#${j.current_run.run_id} ${j.current_run.trigger}, ${j.current_run.status} since ${clock(j.current_run.started_at_ms)}`],
                    ["Last manual run", <span data-testid="job-last-manual">
                      <ResultText r={j.last_manual_run} />
                    </span>],
                  ]}
                />
                {n && (
                  <Notice tone={n.tone} testId="job-note">
                    {n.text}
                  </Notice>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </div>
  );
}
