// Cron jobs and downloads in the dashboard, in a real browser against a real Sluice: "Run now" from
// the UI changes a job's status (pending, running, then its manual result), and the refusals (409 the
// job is already running, 503 the manual queue is full) are shown at the job; a download run from the
// UI fetches from a real HTTP server the test starts and the page shows the size, the last success,
// a failed item's error, and the 409 while another batch runs. Both pages fit 1280×800 and 390×844.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type TestBrowser, type WatchedPage } from "./browser.js";

const ADS = "ads.example\ntracker.example\n";

const config = (files: string): string => `
api:
  http: 127.0.0.1:0
plugins:
  - tag: fetch
    type: download
    args:
      startup_if_missing: false
      timeout: 10s
      downloads:
        - { url: "${files}/files/ads.txt", dir: lists }
        - { url: "${files}/fail/broken.txt", dir: lists }
        - { url: "${files}/gate/held.txt", dir: lists }
  - tag: nightly
    type: cron
    args:
      timezone: UTC
      manual_queue: 1
      jobs:
        - { name: report, schedule: "30 3 * * *", executors: ["sleep 2s"] }
        - { name: quick, interval: 1h, executors: ["sleep 100ms"] }
        - { name: third, interval: 2h, executors: ["sleep 100ms"] }
  - tag: main
    type: sequence
    args:
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

interface JobStatus {
  current_run: { run_id: number; status: string } | null;
  last_manual_run: { run_id: number; status: string; executor_error_count: number } | null;
  next_run_ms: number | null;
}

let files: FileServer;
let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;

beforeAll(async () => {
  files = await startFileServer();
  files.set("ads.txt", ADS);
  files.set("held.txt", "held.example\n");
  s = await startSluice(config(files.url));
  browser = await launchBrowser();
  w = await browser.open();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  await files?.close();
});

async function visit(page: WatchedPage["page"], id: string): Promise<void> {
  await page.goto("about:blank");
  await page.goto(`${s.apiUrl}/#/${id}`);
  await page.locator("main h1").first().waitFor();
}

const jobsNow = async (): Promise<Record<string, JobStatus>> => ((await (await s.api("/api/plugins/nightly/jobs/status")).json()) as { jobs: Record<string, JobStatus> }).jobs;

describe("cron jobs", { timeout: 60_000 }, () => {
  test("Run now changes the job's status; a second run is refused with 409, a full queue with 503", async () => {
    await visit(w.page, "jobs");
    const cron = w.page.getByTestId("cron-nightly");
    const job = (name: string) => cron.locator(`li[data-job="${name}"]`);
    await job("report").getByTestId("job-last-manual").getByText("none yet").waitFor();
    expect(await job("report").getAttribute("data-state")).toBe("idle");
    // The schedule and the next run as the API reports them.
    expect(await job("report").textContent()).toContain("30 3 * * *");
    expect(await job("quick").textContent()).toContain("every 1 h");
    expect((await jobsNow()).report.last_manual_run).toBeNull();

    await job("report").getByRole("button", { name: "Run job report of nightly now" }).click();
    await job("report").getByTestId("job-note").getByText("Run #1 accepted").waitFor();
    await cron.locator('li[data-job="report"][data-state="running"]').waitFor();
    expect((await jobsNow()).report.current_run).toMatchObject({ run_id: 1, status: "running" });

    // The same job again while it runs: refused, not queued.
    await job("report").getByRole("button", { name: "Run job report of nightly now" }).click();
    await job("report").getByTestId("job-note").getByText("Refused (409 cron_job_already_running): this job has an active run; the trigger was not queued").waitFor();
    // Another job waits in the manual queue (size 1)...
    await job("quick").getByRole("button", { name: "Run job quick of nightly now" }).click();
    await cron.locator('li[data-job="quick"][data-state="pending"]').waitFor();
    // ...so a third is refused: the queue is full.
    await job("third").getByRole("button", { name: "Run job third of nightly now" }).click();
    await job("third").getByTestId("job-note").getByText(/^Refused \(503 cron_unavailable\): the manual-trigger queue of this cron plugin is full/).waitFor();
    await w.screenshot("jobs-cron-refused");

    // The run ends: the page shows its result, as the API does, and the queued job runs after it.
    await job("report").getByTestId("job-note").getByText("Run #1 finished: completed.").waitFor({ timeout: 15_000 });
    await job("report").getByTestId("job-last-manual").getByText("completed").waitFor();
    expect(await job("report").getByTestId("job-last-manual").textContent()).toMatch(/^completed run #1, /);
    await cron.locator('li[data-job="report"][data-state="idle"]').waitFor();
    await job("quick").getByTestId("job-note").getByText(/^Run #\d+ finished: completed\.$/).waitFor({ timeout: 15_000 });
    const after = await jobsNow();
    expect(after.report.last_manual_run).toMatchObject({ run_id: 1, status: "completed", executor_error_count: 0 });
    expect(after.quick.last_manual_run).toMatchObject({ status: "completed" });
    expect(after.third.last_manual_run).toBeNull();
    await w.screenshot("jobs-cron-done");
    expect(
      w.problems([
        { status: 409, path: "/api/plugins/nightly/jobs/report/run" },
        { status: 503, path: "/api/plugins/nightly/jobs/third/run" },
      ]),
    ).toEqual([]);
  });
});

describe("downloads", { timeout: 60_000 }, () => {
  test("Run fetches from the test's HTTP server and shows size and success; a failed item shows its error; a busy plugin shows the 409", async () => {
    await visit(w.page, "jobs");
    const dl = w.page.getByTestId("downloads-fetch");
    const row = (i: number) => dl.locator(`tr[data-index="${i}"]`);
    await row(0).getByText("not run yet").waitFor();
    expect(files.hits("/files/ads.txt")).toBe(0);

    await row(0).getByRole("button", { name: "Run download #0 (ads.txt) of fetch" }).click();
    await dl.getByTestId("download-result").getByText("Ran download #0: 1 of 1 downloaded.").waitFor();
    await dl.locator('tr[data-index="0"][data-state="ok"]').waitFor();
    expect(await row(0).locator("td[data-col=size]").textContent()).toBe(`${ADS.length} B`);
    expect(await row(0).locator("td[data-col=success]").textContent()).not.toBe("never");
    expect(files.hits("/files/ads.txt")).toBe(1);
    expect(readFileSync(join(s.dir, "lists", "ads.txt"), "utf8")).toBe(ADS);

    await row(1).getByRole("button", { name: "Run download #1 (broken.txt) of fetch" }).click();
    await dl.getByTestId("download-result").getByText("Ran download #1: 1 of 1 failed (their previous files are unchanged; see Last error), 0 downloaded.").waitFor();
    await dl.locator('tr[data-index="1"][data-state="failed"]').waitFor();
    expect(await row(1).locator("td[data-col=error]").textContent()).toMatch(/500/);

    // A batch started elsewhere (here by curl; a cron job does the same) holds the plugin: the page shows it running and Run all is refused.
    const held = s.api("/api/plugins/fetch/download", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ index: 2 }) });
    await files.waitHeld("held.txt");
    await dl.getByRole("button", { name: "Refresh downloads of fetch" }).click();
    await dl.locator('tr[data-index="2"][data-state="running"]').waitFor();
    await dl.getByRole("button", { name: "Run all downloads of fetch" }).click();
    await dl.getByTestId("download-result").getByText(/^Could not run all downloads\. Refused \(409 download_busy\): a download batch of this plugin is running/).waitFor();
    await w.screenshot("jobs-downloads-busy");
    files.release("held.txt");
    expect(await ((await held).json())).toEqual({ ok: true, total: 1, succeeded: 1, failed: 0 });
    // The page follows the batch it did not start to its end.
    await dl.locator('tr[data-index="2"][data-state="ok"]').waitFor();
    expect(files.hits("/files/ads.txt")).toBe(1);
    await w.screenshot("jobs-downloads");
    expect(w.problems([{ status: 409, path: "/api/plugins/fetch/download" }])).toEqual([]);
  });
});

describe("following the actor stream", { timeout: 60_000 }, () => {
  test("an idle Cron & downloads page asks the server nothing; a run started elsewhere shows up by itself", async () => {
    // The page's clock is Playwright's: it runs as the real one, and the test moves it on instead of waiting.
    await w.page.clock.install();
    await visit(w.page, "jobs");
    const cron = w.page.getByTestId("cron-nightly");
    await cron.locator('li[data-job="third"] [data-testid=job-last-manual]').waitFor();
    await w.page.getByTestId("downloads-fetch").locator('tr[data-index="0"]').waitFor();
    await new Promise((r) => setTimeout(r, 500));
    const asked: string[] = [];
    const onRequest = (req: { url(): string }): void => {
      const path = new URL(req.url()).pathname;
      if (path.startsWith("/api/")) asked.push(path);
    };
    w.page.on("request", onRequest);
    try {
      // 11 s of the page's time, every timer it set firing as due: the pages used to read again every 5 s
      // (downloads) and 10 s (cron) while idle, every second while busy. A request a timer started is
      // seen within the real half second after.
      await w.page.clock.runFor(11_000);
      await new Promise((r) => setTimeout(r, 500));
      expect(asked).toEqual([]);
      // A run started elsewhere (curl; a schedule does the same): the stream tells the page, which reads the jobs again.
      expect((await s.api("/api/plugins/nightly/jobs/third/run", { method: "POST" })).status).toBe(202);
      await cron.locator('li[data-job="third"] [data-testid=job-last-manual]').getByText("completed").waitFor({ timeout: 10_000 });
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.every((p) => p === "/api/plugins/nightly/jobs/status")).toBe(true);
    } finally {
      w.page.off("request", onRequest);
    }
  });
});

describe("layout", { timeout: 60_000 }, () => {
  test("Cron & downloads and the Plugins page's job and download sections fit 1280×800 and 390×844, with visible focus and no console error", async () => {
    for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      const view = await browser.open(viewport);
      await visit(view.page, "jobs");
      await view.page.getByTestId("cron-nightly").locator('li[data-job="report"] [data-testid=job-last-manual]').waitFor();
      await view.page.getByTestId("downloads-fetch").locator('tr[data-index="0"]').waitFor();
      expect(await view.page.locator("nav[aria-label=Pages] a").allTextContents()).toContain("Cron & downloads");
      expect(await overflow(view.page), `jobs at ${name}`).toEqual([]);
      await view.screenshot(`jobs-${name}`);
      expect((await tabThrough(view.page, 14)).filter((f) => !f.visible && f.element !== "body"), `jobs at ${name}`).toEqual([]);

      // On the Plugins page each cron and download plugin opens the same views in its card.
      await visit(view.page, "plugins");
      await view.page.getByTestId("jobs-nightly").locator("summary").click();
      await view.page.getByTestId("downloads-of-fetch").locator("summary").click();
      await view.page.getByTestId("jobs-nightly").locator('li[data-job="quick"] [data-testid=job-last-manual]').waitFor();
      await view.page.getByTestId("downloads-of-fetch").locator('tr[data-index="2"]').waitFor();
      expect(await overflow(view.page), `plugins at ${name}`).toEqual([]);
      await view.screenshot(`plugins-jobs-${name}`);
      expect(view.problems(), name).toEqual([]);
      await view.page.close();
    }
  }, 90_000);
});
