// The `cron` plugin over the real API, with real timers and a real HTTP file server on 127.0.0.1:
// manual runs (202, 404, 409, 503 for a full queue and while stopping), concurrent manual runs,
// executor errors counted while later executors still run, interval jobs that run repeatedly with
// increasing run_id, skipped triggers, reload cancelling an active run, and the `reload` executor.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { until } from "../model/harness.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { checkErrors } from "../helpers/check.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let files: FileServer;
beforeAll(async () => {
  files = await startFileServer();
  files.set("list.txt", "full:listed.example\n");
});
afterAll(() => files.close());

type Json = Record<string, unknown>;
type JobStatus = { schedule: string | null; interval_ms: number | null; next_run_ms: number | null; current_run: Json | null; last_manual_run: Json | null };

const run = (s: RunningSluice, tag: string, job: string): Promise<Response> => s.api(`/api/plugins/${tag}/jobs/${encodeURIComponent(job)}/run`, { method: "POST" });
const status = async (s: RunningSluice, tag: string): Promise<Record<string, JobStatus>> => ((await (await s.api(`/api/plugins/${tag}/jobs/status`)).json()) as { jobs: Record<string, JobStatus> }).jobs;
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;
const metric = async (s: RunningSluice, name: string, tag: string): Promise<number> => {
  const text = await (await s.api("/api/metrics")).text();
  return Number(new RegExp(`^${name}\\{plugin_tag="${tag}"\\} (\\d+)`, "m").exec(text)?.[1] ?? "NaN");
};
const finished = (s: RunningSluice, job: string): Json[] => s.logs.filter((l) => l.msg === "cron run finished" && l.job === job);

const head = `api:
  http: 127.0.0.1:0
plugins:
  - tag: main
    type: sequence
    args:
      - exec: reject 5
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

describe("manual runs", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(`${head}  - tag: gated
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/g1.txt", dir: out }] }
  - tag: gated2
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/g2.txt", dir: out }] }
  - tag: broken
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/fail/x.txt", dir: out }] }
  - tag: fetch
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/files/list.txt", dir: out }] }
  - tag: jobs
    type: cron
    args:
      manual_queue: 1
      jobs:
        - { name: "nightly list", schedule: "0 3 * * *", executors: [$gated] }
        - { name: second, schedule: "0 4 * * *", executors: [gated2] }
        - { name: third, schedule: "0 5 * * *", executors: ["sleep 10"] }
        - { name: mixed, interval: 1h, executors: [$broken, fetch, "sleep 1"] }
        - { name: allbad, interval: 1h, executors: [$broken, $broken] }
`);
    files.set("g1.txt", "one\n");
    files.set("g2.txt", "two\n");
  });
  afterAll(() => s.stop());

  test("GET jobs/status before any run", async () => {
    const before = Date.now();
    const jobs = await status(s, "jobs");
    expect(Object.keys(jobs)).toEqual(["nightly list", "second", "third", "mixed", "allbad"]);
    expect(jobs["nightly list"]).toMatchObject({ schedule: "0 3 * * *", interval_ms: null, current_run: null, last_manual_run: null });
    expect(jobs["nightly list"].next_run_ms as number).toBeGreaterThan(before);
    expect(new Date(jobs["nightly list"].next_run_ms as number).getMinutes()).toBe(0);
    expect(jobs.mixed).toMatchObject({ schedule: null, interval_ms: 3_600_000, current_run: null });
    expect(jobs.mixed.next_run_ms as number).toBeGreaterThan(before + 3_500_000);
  });

  test("202 with run_id 1; the run shows as current, then as the latest manual result", async () => {
    const res = await run(s, "jobs", "nightly list");
    expect(res.status).toBe(202);
    expect(await json(res)).toEqual({ ok: true, job: "nightly list", status: "started", trigger: "manual", run_id: 1 });
    await files.waitHeld("g1.txt");
    const during = (await status(s, "jobs"))["nightly list"];
    expect(during.current_run).toMatchObject({ run_id: 1, trigger: "manual", status: "running" });
    expect(during.last_manual_run).toBeNull();
    files.release("g1.txt");
    await until("the run to end", () => finished(s, "nightly list").length === 1);
    const after = (await status(s, "jobs"))["nightly list"];
    expect(after.current_run).toBeNull();
    expect(after.last_manual_run).toMatchObject({ run_id: 1, status: "completed", executor_error_count: 0 });
    expect(await metric(s, "cron_job_run_total", "jobs")).toBe(1);
  });

  test("404 cron_job_not_found for a name that is not a job", async () => {
    for (const name of ["nope", "nightly", "Nightly list", "__proto__", "toString"]) {
      const res = await run(s, "jobs", name);
      expect(res.status, name).toBe(404);
      expect(await json(res)).toMatchObject({ ok: false, code: "cron_job_not_found" });
    }
  });

  test("409 cron_job_already_running during a run; concurrent manual runs never both start", async () => {
    const all = await Promise.all(Array.from({ length: 10 }, () => run(s, "jobs", "nightly list")));
    const codes = all.map((r) => r.status).sort();
    expect(codes).toEqual([202, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    const refused = await json(all.find((r) => r.status === 409) as Response);
    expect(refused).toMatchObject({ ok: false, code: "cron_job_already_running" });
    await files.waitHeld("g1.txt");
    await new Promise((r) => setTimeout(r, 100));
    expect(files.held("g1.txt")).toBe(1);
    const again = await run(s, "jobs", "nightly list");
    expect(again.status).toBe(409);
    files.release("g1.txt");
    await until("the run to end", () => finished(s, "nightly list").length === 2);
    expect((await status(s, "jobs"))["nightly list"].last_manual_run).toMatchObject({ run_id: 2, status: "completed" });
  });

  test("manual runs of one plugin run one at a time; the next waits as pending; 503 cron_unavailable when the queue is full", async () => {
    expect((await run(s, "jobs", "nightly list")).status).toBe(202);
    await files.waitHeld("g1.txt");
    const queued = await run(s, "jobs", "second");
    expect(queued.status).toBe(202);
    expect(await json(queued)).toMatchObject({ run_id: 1 });
    expect((await status(s, "jobs")).second.current_run).toMatchObject({ run_id: 1, trigger: "manual", status: "pending" });
    // manual_queue: 1 and one run waiting: a third is refused, not queued.
    const full = await run(s, "jobs", "third");
    expect(full.status).toBe(503);
    expect(await json(full)).toMatchObject({ ok: false, code: "cron_unavailable" });
    // The waiting job's own trigger is still a 409.
    expect((await run(s, "jobs", "second")).status).toBe(409);
    expect(files.held("g2.txt")).toBe(0);
    files.release("g1.txt");
    await files.waitHeld("g2.txt");
    expect((await status(s, "jobs")).second.current_run).toMatchObject({ status: "running" });
    files.release("g2.txt");
    await until("the second run to end", () => finished(s, "second").length === 1);
    expect((await run(s, "jobs", "third")).status).toBe(202);
    await until("the third run to end", () => finished(s, "third").length === 1);
  });

  test("an executor error is counted and later executors still run; every executor failing is `failed`", async () => {
    const errorsBefore = await metric(s, "cron_executor_error_total", "jobs");
    const hits = files.hits("/files/list.txt");
    expect((await run(s, "jobs", "mixed")).status).toBe(202);
    await until("the run to end", () => finished(s, "mixed").length === 1);
    expect(files.hits("/files/list.txt")).toBe(hits + 1);
    expect((await status(s, "jobs")).mixed.last_manual_run).toMatchObject({ run_id: 1, status: "completed_with_errors", executor_error_count: 1 });
    expect((await run(s, "jobs", "allbad")).status).toBe(202);
    await until("the run to end", () => finished(s, "allbad").length === 1);
    expect((await status(s, "jobs")).allbad.last_manual_run).toMatchObject({ status: "failed", executor_error_count: 2 });
    expect(await metric(s, "cron_executor_error_total", "jobs")).toBe(errorsBefore + 3);
    const warning = s.logs.find((l) => l.msg === "cron executor failed; the job goes on with the next one" && l.job === "mixed");
    expect(warning).toMatchObject({ executor: "broken", run_id: 1, trigger: "manual" });
  });

  test("a cron plugin called as a pipeline step fails the query", async () => {
    const s2 = await startSluice(`plugins:
  - { tag: c, type: cron, args: { jobs: [{ name: j, interval: 1h, executors: ["sleep 1"] }] } }
  - tag: main
    type: sequence
    args:
      - exec: $c
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
    try {
      expect(rcodeOf(await query(s2.udpPort, "x.example", "A"))).toBe(2);
    } finally {
      await s2.stop();
    }
  });
});

describe("interval jobs and skipped triggers", () => {
  test("an interval job runs repeatedly with increasing run_id; triggers during a run are skipped and counted", async () => {
    const s = await startSluice(`${head}  - tag: ticker
    type: cron
    args:
      jobs:
        - { name: fast, interval: 1s, executors: ["sleep 10"] }
        - { name: slow, interval: 1s, executors: ["sleep 2500ms"] }
`);
    try {
      const started = Date.now();
      await until("three runs of the fast job", () => finished(s, "fast").length >= 3, 10_000);
      const ids = finished(s, "fast").map((l) => l.run_id);
      expect(ids.slice(0, 3)).toEqual([1, 2, 3]);
      expect(finished(s, "fast").every((l) => l.trigger === "interval" && l.status === "completed")).toBe(true);
      // About one per second (never before the first full interval).
      expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
      const jobs = await status(s, "ticker");
      expect(jobs.fast.next_run_ms as number).toBeGreaterThan(Date.now() - 50);
      expect(jobs.fast.last_manual_run).toBeNull();
      await until("a skipped trigger", () => s.logs.some((l) => l.msg === "cron trigger skipped: the job's previous run is still active" && l.job === "slow"), 10_000);
      expect(await metric(s, "cron_job_skipped_total", "ticker")).toBeGreaterThanOrEqual(1);
      expect((await status(s, "ticker")).slow.current_run).toMatchObject({ run_id: 1, trigger: "interval", status: "running" });
    } finally {
      await s.stop();
    }
  });
});

async function reloadDone(s: RunningSluice, since: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const r = (await (await s.api("/api/reload/status")).json()) as { status: string; last_success_ms: number | null };
    if (r.status === "ok" && (r.last_success_ms ?? 0) >= since) return;
    await new Promise((res) => setTimeout(res, 20));
  }
  throw new Error("the reload did not succeed");
}

describe("reload and shutdown", () => {
  const yaml = (): string => `${head}  - tag: gated
    type: download
    args: { startup_if_missing: false, downloads: [{ url: "${files.url}/gate/r.txt", dir: out }] }
  - tag: jobs
    type: cron
    args:
      jobs:
        - { name: long, schedule: "0 3 * * *", executors: [$gated, "sleep 10"] }
        - { name: sleepy, schedule: "0 3 * * *", executors: ["sleep 1500ms"] }
`;

  test("a reload during a long run marks it cancelled; the new runtime's jobs start fresh", async () => {
    const s = await startSluice(yaml());
    files.set("r.txt", "r\n");
    try {
      expect((await run(s, "jobs", "long")).status).toBe(202);
      await files.waitHeld("r.txt");
      expect((await run(s, "jobs", "long")).status).toBe(409);
      const since = Date.now();
      expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
      await reloadDone(s, since);
      const done = await until("the run to be cancelled", () => finished(s, "long")[0], 10_000);
      expect(done).toMatchObject({ run_id: 1, trigger: "manual", status: "cancelled" });
      // The cancelled download let go of its request at once.
      await until("the held request to be dropped", () => files.held("r.txt") === 0);
      const jobs = await status(s, "jobs");
      expect(jobs.long).toMatchObject({ current_run: null, last_manual_run: null });
      // The new runtime numbers its runs from 1 again.
      expect(await json(await run(s, "jobs", "long"))).toMatchObject({ run_id: 1 });
      await files.waitHeld("r.txt");
      files.release("r.txt");
      await until("the new run to end", () => finished(s, "long").length === 2);
      expect(finished(s, "long")[1]).toMatchObject({ run_id: 1, status: "completed" });
      expect((await status(s, "jobs")).long.last_manual_run).toMatchObject({ run_id: 1, status: "completed" });
    } finally {
      await s.stop();
    }
  });

  test("while a shutdown waits for a run to end, a manual trigger is refused with 503 cron_unavailable", async () => {
    const s = await startSluice(yaml());
    try {
      expect((await run(s, "jobs", "sleepy")).status).toBe(202);
      expect((await s.api("/api/shutdown", { method: "POST" })).status).toBe(202);
      // The sleep executor does not stop early: the plugin's destroy waits for it, refusing new runs meanwhile.
      let refused: Json | null = null;
      const seen: number[] = [];
      for (let i = 0; i < 200 && refused === null; i++) {
        const res = await run(s, "jobs", "long");
        seen.push(res.status);
        if (res.status === 503) refused = await json(res);
        else await new Promise((r) => setTimeout(r, 5));
      }
      expect(refused, JSON.stringify(seen)).toMatchObject({ ok: false, code: "cron_unavailable" });
      await s.app.done;
      expect(finished(s, "sleepy")[0]).toMatchObject({ status: "cancelled" });
    } finally {
      await s.stop();
    }
  });
});

describe("the reload executor", () => {
  test("a job's `reload` reloads the configuration like POST /api/reload; a second one while it is pending is an executor error", async () => {
    const s = await startSluice(`${head}  - tag: jobs
    type: cron
    args:
      jobs:
        - { name: reload twice, schedule: "0 3 * * *", executors: [reload, reload] }
`);
    try {
      const since = Date.now();
      expect((await run(s, "jobs", "reload twice")).status).toBe(202);
      await reloadDone(s, since);
      expect(finished(s, "reload twice")[0]).toMatchObject({ status: "completed_with_errors", executor_error_count: 1 });
      const warning = s.logs.find((l) => l.msg === "cron executor failed; the job goes on with the next one");
      expect(warning).toMatchObject({ executor: "qs.cron.jobs.0.1.reload", err: "reload: refused: a reload is already pending or in progress" });
      const plugins = (await (await s.api("/api/plugins")).json()) as { generation: number };
      expect(plugins.generation).toBe(2);
      expect(await metric(s, "reload_trigger_total", "qs.cron.jobs.0.0.reload")).toBe(1);
      expect(await metric(s, "reload_error_total", "qs.cron.jobs.0.1.reload")).toBe(1);
    } finally {
      await s.stop();
    }
  });
});

describe("check-time errors, located in the file", () => {
  const check = (jobs: string, extra = ""): string => {
    const dir = tempDir();
    writeFileSync(
      join(dir, "sluice.yaml"),
      `plugins:
  - { tag: other, type: cron, args: { jobs: [{ name: x, interval: 1h, executors: ["sleep 1"] }] } }
  - { tag: seq, type: sequence, args: [{ exec: accept }] }
  - tag: c
    type: cron
    args:
${extra}      jobs:
${jobs}
`,
    );
    return checkErrors(join(dir, "sluice.yaml"));
  };
  test.each([
    ["itself", `        - { name: a, interval: 1h, executors: [$c] }`, /sluice\.yaml:8:\d+: error: plugin 'c': args\.jobs\[0\]\.executors\[0\] references itself/],
    ["another cron by tag", `        - { name: a, interval: 1h, executors: [other] }`, /sluice\.yaml:8:\d+: error: .*references 'other' \(type 'cron'\): a cron job cannot run another cron/],
    ["another cron by $tag", `        - { name: a, interval: 1h, executors: [$other] }`, /a cron job cannot run another cron/],
    ["a cron quick setup", `        - { name: a, interval: 1h, executors: ["cron x"] }`, /a cron job cannot run another cron/],
    ["a missing tag", `        - { name: a, interval: 1h, executors: [nothere] }`, /references missing plugin 'nothere'/],
    ["a bad quick setup", `        - { name: a, interval: 1h, executors: ["sleep forever"] }`, /'sleep forever'/],
    ["six fields", `        - { name: a, schedule: "0 0 3 * * *", executors: [seq] }`, /has 6 fields; a schedule has 5 \(minute hour day-of-month month day-of-week\); seconds are not supported/],
    ["a bad field", `        - { name: a, schedule: "61 * * * *", executors: [seq] }`, /'61 \* \* \* \*' is not a valid schedule/],
    ["an interval under 1s", `        - { name: a, interval: 500ms, executors: [seq] }`, /interval "500ms" is shorter than the minimum of 1s/],
    ["schedule and interval", `        - { name: a, interval: 1h, schedule: "0 3 * * *", executors: [seq] }`, /a job has exactly one of schedule and interval/],
    ["neither", `        - { name: a, executors: [seq] }`, /a job has exactly one of schedule and interval/],
    ["duplicate names", `        - { name: a, interval: 1h, executors: [seq] }\n        - { name: a, interval: 2h, executors: [seq] }`, /sluice\.yaml:9:\d+: error: .*duplicate job name \(also jobs\[0\]\)/],
    ["a name with spaces around", `        - { name: " a", interval: 1h, executors: [seq] }`, /a job name may not start or end with spaces/],
  ])("%s", async (_name, jobs, message) => {
    expect(check(jobs)).toMatch(message);
  });
  test("an unknown time zone", async () => {
    expect(check(`        - { name: a, schedule: "0 3 * * *", executors: [seq] }`, "      timezone: Mars/Olympus\n")).toMatch(/sluice\.yaml:7:\d+: error: .*'Mars\/Olympus' is not a time zone/);
  });
});
