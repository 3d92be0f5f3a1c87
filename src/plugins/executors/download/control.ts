// The download plugin's control plane: the download:<tag> actor (machines/download.machine.ts) runs
// the start-up fetches and one batch at a time, and keeps each item's status; the routes under
// /api/plugins/<tag>/: GET downloads lists the configured items with the actor's status of each, POST download runs a batch (all items, or one by index) and answers when it is done.
// Only configured targets can be fetched: the body can name an index, never a URL or a path.

import { stat } from "node:fs/promises";
import { fromPromise } from "xstate";
import { downloadMachine, fetching, type DownloadContext, type DownloadInput, type DownloadResult, type FetchInput } from "../../../../machines/download.machine.js";
import { bodyField, RouteError, type ConcernHandle, type PluginControl, type PluginRoute } from "../../../registry/control.js";
import type { Downloader } from "./index.js";
import { downloadBatchSchema, downloadsSchema } from "./schemas.js";

/** Each item: its configuration, the actor's status of it, and the size of its file on disk now (null when there is none). */
async function list(downloader: Downloader, concern: ConcernHandle): Promise<object[]> {
  const snapshot = concern.snapshot() as { value: unknown; context: DownloadContext };
  return Promise.all(
    downloader.items.map(async (item, index) => {
      let size: number | null;
      try {
        size = (await stat(item.path)).size;
      } catch {
        size = null;
      }
      const status = snapshot.context.items[index] ?? { last_run_ms: null, last_success_ms: null, last_error: null };
      return { index, url: item.url, path: item.path, running: fetching(snapshot, index), ...status, size_bytes: size };
    }),
  );
}

const routes: PluginRoute<Downloader>[] = [
  {
    method: "GET",
    role: "viewer",
    path: "downloads",
    summary: "The configured downloads with their last run, last success, last error and file size",
    schema: { response: { 200: downloadsSchema } },
    async handle(_req, plugin) {
      return { ok: true, items: await list(plugin.view, plugin.concern) };
    },
  },
  {
    method: "POST",
    role: "operator",
    path: "download",
    audit: (req) => `download ${bodyField(req.body, "index") || "every file"}`,
    summary: "Download every configured file ({}) or one ({index}); answers when the batch is done",
    description: "ok is false when any file failed (timeouts included); the previous file of a failed item is unchanged. A batch already running (manual, pipeline or cron) makes this 409 download_busy.",
    invalidBody: "invalid_download_request",
    errors: ["invalid_download_request", "download_index_out_of_range", "download_busy"],
    schema: {
      body: { type: "object", additionalProperties: false, properties: { index: { type: "integer", minimum: 0 } } },
      response: { 200: downloadBatchSchema },
    },
    async handle(req, plugin) {
      const index = (req.body as { index?: number }).index ?? null;
      if (index !== null && index >= plugin.view.items.length) {
        throw new RouteError("download_index_out_of_range", `index ${index} is out of range: '${plugin.tag}' has ${plugin.view.items.length} downloads (0-${plugin.view.items.length - 1})`);
      }
      const result = (await plugin.concern.ask({ type: "DOWNLOAD.RUN", index, source: "manual" })) as DownloadResult;
      return { ok: result.failed === 0, ...result };
    },
  },
];

export const downloadControl: PluginControl<Downloader> = {
  // With data-plane workers, the primary runs the jobs (a worker's providers follow its reloads).
  primaryOnly: true,
  concern: (downloader, env) => {
    const input: DownloadInput = { tag: env.tag, clock: Date.now, items: downloader.items.length, missing: [...downloader.missingAtStart] };
    return {
      id: `download:${env.tag}`,
      // Missing files are fetched before the plugin is ready; a failure fails the start or reload, located at the plugin.
      startup: input.missing.length > 0,
      logic: downloadMachine.provide({
        actors: {
          fetch: fromPromise(({ input: i }: { input: FetchInput }) => downloader.fetch(i.index, i.signal)),
          fetchMissing: fromPromise(async ({ input: i }: { input: FetchInput }) => {
            try {
              return await downloader.fetchMissing(i.index);
            } catch (err) {
              throw env.pluginError(err, "could not prepare");
            }
          }),
        },
      }),
      input,
    };
  },
  routes,
};
