// A download plugin's items (GET .../downloads): status, last run, last success, last error and the
// size on disk, with "Run" for one item and "Run all" (POST .../download, answered when the batch is
// done). A refusal (409: a batch of this plugin is already running, e.g. started by a cron job) is
// shown above the table; a batch whose items failed says which ones, the old files being kept.
// Running needs the operator role.

import { useSignal } from "@preact/signals";
import { api, errorText, pluginPath, refusalText, send } from "../api";
import { useActorLoad } from "../actors";
import { Badge, Notice, type Tone } from "../components/ui";
import { bytes, when } from "../format";
import { can } from "../session";
import type { DownloadBatch, DownloadItem, DownloadsAnswer } from "../shapes";

function itemState(i: DownloadItem): { word: string; tone: Tone } {
  if (i.running) return { word: "running", tone: "info" };
  if (i.last_error !== null) return { word: "failed", tone: "error" };
  if (i.last_success_ms !== null) return { word: "ok", tone: "ok" };
  return { word: "not run yet", tone: "muted" };
}

const fileName = (path: string): string => path.split(/[\\/]/).pop() ?? path;

export function Downloads({ tag }: { tag: string }) {
  const items = useSignal<DownloadItem[] | null>(null);
  const error = useSignal<string | null>(null);
  /** "all", an item index, or null: the batch this page asked for and waits on. */
  const asking = useSignal<"all" | number | null>(null);
  const result = useSignal<{ tone: Tone; text: string } | null>(null);

  const load = async (): Promise<void> => {
    try {
      items.value = (await api<DownloadsAnswer>(pluginPath(tag, "downloads"))).items;
      error.value = null;
    } catch (err) {
      error.value = errorText(err);
    }
  };

  // Loaded once, then again when this plugin's actors change (a batch starts or ends): no polling.
  useActorLoad(tag, (id) => id.includes(`/plugin:${tag}/`), load);

  const run = async (which: "all" | number): Promise<void> => {
    asking.value = which;
    result.value = null;
    const what = which === "all" ? "all downloads" : `download #${which}`;
    try {
      // The answer comes when the batch is done; the ticker shows its items running meanwhile.
      void load();
      const r = await send<DownloadBatch>("POST", pluginPath(tag, "download"), which === "all" ? {} : { index: which });
      result.value =
        r.failed === 0
          ? { tone: "ok", text: `Ran ${what}: ${r.succeeded} of ${r.total} downloaded.` }
          : { tone: "warn", text: `Ran ${what}: ${r.failed} of ${r.total} failed (their previous files are unchanged; see Last error), ${r.succeeded} downloaded.` };
    } catch (err) {
      result.value = { tone: "error", text: `Could not run ${what}. ${refusalText(err)}` };
    } finally {
      asking.value = null;
      await load();
    }
  };

  const list = items.value;
  const busy = asking.value !== null;
  const operator = can("operator");
  return (
    <div class="control" data-testid={`downloads-${tag}`}>
      <div class="toolbar">
        {operator && (
          <button type="button" onClick={() => void run("all")} disabled={busy} aria-label={`Run all downloads of ${tag}`}>
            {asking.value === "all" ? "Running all…" : "Run all"}
          </button>
        )}
        <button type="button" onClick={() => void load()} aria-label={`Refresh downloads of ${tag}`}>
          Refresh
        </button>
      </div>
      {result.value && (
        <Notice tone={result.value.tone} testId="download-result">
          {result.value.text}
        </Notice>
      )}
      {error.value && <Notice tone="error">{error.value}</Notice>}
      {list === null && !error.value && <p class="hint">Loading downloads…</p>}
      {list !== null && (
        <div class="table-wrap">
          {/* On a phone each row becomes a block of labelled lines (pages.css, table.stack). */}
          <table class="stack">
            <thead>
              <tr>
                {operator && (
                  <th scope="col">
                    <span class="sr-only">Run</span>
                  </th>
                )}
                <th scope="col">File</th>
                <th scope="col">Status</th>
                <th scope="col">Size</th>
                <th scope="col">Last success</th>
                <th scope="col">Last run</th>
                <th scope="col">Last error</th>
              </tr>
            </thead>
            <tbody>
              {list.map((i) => {
                const st = itemState(i);
                return (
                  <tr key={i.index} data-index={i.index} data-state={st.word}>
                    {operator && (
                      <td>
                        <button type="button" class="small" onClick={() => void run(i.index)} disabled={busy} aria-label={`Run download #${i.index} (${fileName(i.path)}) of ${tag}`}>
                          {asking.value === i.index ? "Running…" : "Run"}
                        </button>
                      </td>
                    )}
                    <td data-label="File">
                      <div>
                        <span class="mono" title={i.path}>
                          {fileName(i.path)}
                        </span>
                        <br />
                        <span class="hint mono url">{i.url}</span>
                      </div>
                    </td>
                    <td data-label="Status">
                      <span>
                        <Badge tone={st.tone}>{st.word}</Badge>
                      </span>
                    </td>
                    <td class="nowrap" data-label="Size" data-col="size">
                      {bytes(i.size_bytes)}
                    </td>
                    <td data-label="Last success" data-col="success">
                      {when(i.last_success_ms)}
                    </td>
                    <td data-label="Last run">{when(i.last_run_ms)}</td>
                    <td data-label="Last error" data-col="error" class="error-text">
                      {i.last_error ?? "—"}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
