// `download`: fetches the configured files (rule lists, GeoIP data) over http/https into their
// directories, each through a temp file renamed over the target, so a failed download never damages
// the previous file. One batch at a time per plugin (the download:<tag> actor,
// machines/download.machine.ts): the API, pipelines and cron jobs share it. See docs/plugins.md#download.

import { stat } from "node:fs/promises";
import { join, normalize } from "node:path";
import type { DnsContext } from "../../../engine/context.js";
import { removeStaleTemps } from "../../../config/atomic-file.js";
import { parseDuration } from "../../../engine/duration.js";
import { Step, type StepResult } from "../../../engine/types.js";
import type { DownloadResult, ItemOutcome } from "../../../../machines/download.machine.js";
import type { Outbound } from "../../../net/outbound.js";
import { ArgError, definePlugin, type ArgProblem, type CheckEnv, type ControlHandle, type ExecutorPlugin } from "../../../registry/types.js";
import type { Cell } from "../../../observability/metrics.js";
import type { Logger } from "../../../observability/logger.js";
import type { Services } from "../../../registry/services.js";
import { downloadControl } from "./control.js";
import { SUPPORTED_PROTOCOLS } from "../../../net/http-get.js";
import { downloadFile, DownloadTimeoutError } from "./fetch.js";

/** Default cap on one file (a GeoIP database is ~70 MB; rule lists are far smaller). */
export const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

interface ItemArgs {
  url: string;
  dir: string;
  filename?: string;
}

export interface DownloadArgs {
  timeout: number | string;
  insecure_skip_verify: boolean;
  startup_if_missing: boolean;
  max_bytes: number;
  downloads: ItemArgs[];
  /** A profile of network.outbound the downloads go out through. */
  outbound?: string;
}

interface Item {
  url: string;
  /** The target path as configured (dir/filename), resolved at create. */
  path: string;
}

const durationOf = (v: number | string): number => parseDuration(v);

/** The file name an item writes: `filename`, or the last segment of the URL's path. */
function fileNameOf(item: ItemArgs, at: (string | number)[]): string {
  let url: URL;
  try {
    url = new URL(item.url);
  } catch {
    throw new ArgError(`'${item.url}' is not a URL`, [...at, "url"]);
  }
  if (!SUPPORTED_PROTOCOLS.has(url.protocol)) throw new ArgError(`only http and https URLs can be downloaded (got '${url.protocol.replace(/:$/, "")}')`, [...at, "url"]);
  let name = item.filename;
  if (name === undefined) {
    const last = url.pathname.split("/").pop() ?? "";
    try {
      name = decodeURIComponent(last);
    } catch {
      name = last;
    }
    if (name === "") throw new ArgError(`the URL's path has no file name; set filename`, [...at, "url"]);
  }
  if (name === "." || name === ".." || /[/\\\0]/.test(name)) throw new ArgError(`'${name}' is not a plain file name`, [...at, item.filename === undefined ? "url" : "filename"]);
  return name;
}

function checkArgs(args: DownloadArgs, env: CheckEnv): ArgProblem[] {
  const problems: ArgProblem[] = [];
  const outbound = args.outbound === undefined ? null : env.outboundProblem(args.outbound);
  if (outbound !== null) problems.push({ path: ["outbound"], message: outbound });
  try {
    if (durationOf(args.timeout) < 1) problems.push({ path: ["timeout"], message: "timeout must be at least 1ms" });
  } catch (err) {
    problems.push({ path: ["timeout"], message: (err as Error).message });
  }
  const seen = new Map<string, number>();
  args.downloads.forEach((item, i) => {
    try {
      const target = normalize(join(item.dir, fileNameOf(item, ["downloads", i])));
      const first = seen.get(target);
      if (first !== undefined) problems.push({ path: ["downloads", i], message: `same target file as downloads[${first}] (${target})` });
      else seen.set(target, i);
    } catch (err) {
      if (!(err instanceof ArgError)) throw err;
      problems.push({ path: err.path, message: err.message });
    }
  });
  return problems;
}

interface Counters {
  success: Cell;
  failure: Cell;
  timeout: Cell;
}

function counters(services: Services, tag: string): Counters {
  const m = services.metrics;
  const labels = { plugin_tag: tag };
  return {
    success: m.counter("download_success_total", "download: files downloaded and in place", ["plugin_tag"])(labels),
    failure: m.counter("download_failure_total", "download: downloads that failed, timeouts included (the previous file stays)", ["plugin_tag"])(labels),
    timeout: m.counter("download_timeout_total", "download: downloads that ran out of time", ["plugin_tag"])(labels),
  };
}

/** Temp files a killed process left beside the target (their directory may not exist yet). */
async function sweepTemps(path: string, log: Logger): Promise<void> {
  try {
    for (const file of await removeStaleTemps(path, "download")) log.info({ path, file }, "removed a temp file left by an interrupted download");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") log.warn({ path, err: (err as Error).message }, "could not look for temp files of interrupted downloads");
  }
}

/** Fetches one item, counting and logging the outcome; resolves with the error text or null. */
async function fetchItem(item: Item, args: DownloadArgs, outbound: Outbound | null, c: Counters, log: Logger, signal?: AbortSignal): Promise<string | null> {
  const started = performance.now();
  try {
    await sweepTemps(item.path, log);
    const bytes = await downloadFile(item.url, item.path, { timeoutMs: durationOf(args.timeout), maxBytes: args.max_bytes, insecureSkipVerify: args.insecure_skip_verify, outbound, signal });
    c.success.value++;
    log.info({ url: item.url, path: item.path, bytes, ms: Math.round(performance.now() - started) }, "download finished");
    return null;
  } catch (err) {
    c.failure.value++;
    if (err instanceof DownloadTimeoutError) c.timeout.value++;
    const message = (err as Error).message;
    log.warn({ url: item.url, path: item.path, err: message }, "download failed; the previous file is unchanged");
    return message;
  }
}

/** The instance: its items and the fetches the download actor runs (the actor keeps each item's status). */
export class Downloader implements ExecutorPlugin {
  readonly items: readonly Item[];
  /** Aborted by destroy: a fetch in flight stops and leaves its file as it was. */
  private readonly gone = new AbortController();
  /** The fetch in flight, which destroy waits for (its temp file is gone once it has settled). */
  private inFlight: Promise<unknown> | null = null;

  constructor(
    readonly args: DownloadArgs,
    items: Item[],
    /** Items whose target did not exist at create (startup_if_missing): the actor fetches them before the plugin is ready. */
    readonly missingAtStart: readonly number[],
    private readonly counters: Counters,
    private readonly log: Logger,
    private readonly self: ControlHandle,
    /** The egress profile the downloads use (null: direct). */
    private readonly outbound: Outbound | null = null,
  ) {
    this.items = items;
  }

  /** Runs through the download actor: a batch already running is waited for, then every item is fetched again. */
  execute(ctx: DnsContext): StepResult {
    return this.runFromPipeline(ctx.signal);
  }

  private async runFromPipeline(signal: AbortSignal | null): Promise<typeof Step.Next> {
    const asked = this.self.ask({ type: "DOWNLOAD.RUN", index: null, source: "pipeline", ...(signal ? { signal } : {}) }) as Promise<DownloadResult>;
    const result = signal ? await abortable(asked, signal) : await asked;
    if (result.failed > 0) throw new Error(`download: ${result.failed} of ${result.total} files failed (the previous files are unchanged; see the log)`);
    return Step.Next;
  }

  /**
   * One item of a batch (the download actor calls this, one at a time). Resolves with the outcome; rejects
   * without fetching when the batch was cancelled (its asker went) or the plugin is going.
   */
  fetch(index: number, signal?: AbortSignal): Promise<ItemOutcome> {
    const item = this.items[index];
    const stop = signal ? AbortSignal.any([signal, this.gone.signal]) : this.gone.signal;
    if (!item) return Promise.reject(new Error(`download: no item ${index}`));
    if (stop.aborted) return Promise.reject(new Error("download: cancelled"));
    const run = fetchItem(item, this.args, this.outbound, this.counters, this.log, stop).then((error) => ({ error }));
    this.inFlight = run;
    return run.finally(() => {
      if (this.inFlight === run) this.inFlight = null;
    });
  }

  /** One missing item at start-up (startup_if_missing); rejects when it could not be fetched. */
  async fetchMissing(index: number): Promise<ItemOutcome> {
    const item = this.items[index];
    if (item) this.log.info({ url: item.url, path: item.path }, "startup_if_missing: fetching a missing file");
    const outcome = await this.fetch(index);
    if (item && outcome.error !== null) throw new Error(`startup_if_missing: downloading ${item.url} to ${item.path} failed: ${outcome.error}`);
    return outcome;
  }

  async destroy(): Promise<void> {
    this.gone.abort();
    await this.inFlight?.catch(() => undefined);
  }
}

/** Stops waiting when `signal` aborts (the asked work goes on; its answer is dropped). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error("download: cancelled"));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Error("download: cancelled"));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Items with their targets resolved against the working directory. */
function itemsOf(args: DownloadArgs, resolvePath: (p: string) => string): Item[] {
  return args.downloads.map((d, i) => ({ url: d.url, path: resolvePath(join(d.dir, fileNameOf(d, ["downloads", i]))) }));
}

/** Indexes of the items whose target does not exist now. */
async function missingItems(items: readonly Item[]): Promise<number[]> {
  const missing: number[] = [];
  for (const [i, item] of items.entries()) {
    try {
      await stat(item.path);
    } catch {
      missing.push(i);
    }
  }
  return missing;
}

export const download = definePlugin<DownloadArgs, "executor", Downloader>({
  type: "download",
  kind: "executor",
  feature: "download",
  summary: "Downloads the configured files (http/https) into place atomically; one batch at a time.",
  schema: {
    type: "object",
    additionalProperties: false,
    required: ["downloads"],
    properties: {
      timeout: { type: ["integer", "string"], minimum: 1, default: "30s" },
      insecure_skip_verify: { type: "boolean", default: false },
      startup_if_missing: { type: "boolean", default: true },
      max_bytes: { type: "integer", minimum: 1, maximum: 4 * 1024 * 1024 * 1024, default: DEFAULT_MAX_BYTES },
      outbound: { type: "string", minLength: 1 },
      downloads: {
        type: "array",
        minItems: 1,
        maxItems: 1000,
        items: {
          type: "object",
          additionalProperties: false,
          required: ["url", "dir"],
          properties: { url: { type: "string", minLength: 1 }, dir: { type: "string", minLength: 1 }, filename: { type: "string", minLength: 1 } },
        },
      },
    },
  },
  check: (args, env) => checkArgs(args, env),
  // startup_if_missing: targets that do not exist are fetched before the plugin is ready (machines/download.machine.ts
  // `starting`); download plugins are created before the others, so their readers find the files.
  createdFirst: true,
  async create(args, ctx) {
    const items = itemsOf(args, (p) => ctx.resolvePath(p));
    const missing = args.startup_if_missing ? await missingItems(items) : [];
    const outbound = args.outbound === undefined ? null : ctx.outbound(args.outbound);
    return new Downloader(args, items, missing, counters(ctx.services, ctx.tag), ctx.log, ctx.control(ctx.tag), outbound);
  },
  control: downloadControl,
});

