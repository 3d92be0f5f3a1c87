// Configuration: edit the YAML file (GET /api/config), validate it on the server
// (POST /api/config/validate: diagnostics at their line and column), save it with base_version
// (PUT /api/config; a 409 conflict shows both versions and saves nothing) and reload with its status.

import { signal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { ApiFailure, api, errorText, onSignOut, send } from "../api";
import { shortVersion, when } from "../format";
import { Badge, Notice, toneOf, type Tone } from "../components/ui";
import { ConfigEditor, DiagnosticList, showProblem, type Diagnostic } from "./config-editor";
import { loadPlugins } from "../features";
import { loadOnChange } from "../actors";
import type { ConfigFile, ConfigSaved, ConfigValid, ReloadStatus } from "../shapes";

// Module state: an unsaved edit survives moving to another page and back.
const file = signal<ConfigFile | null>(null);
const text = signal("");
/** The version the edit started from (sent as base_version). */
const base = signal<string | null>(null);
const diagnostics = signal<Diagnostic[]>([]);
const message = signal<{ tone: Tone; text: string } | null>(null);
const conflict = signal<{ mine: string; server: ConfigFile } | null>(null);
const reloadAfterSave = signal(true);
const reload = signal<ReloadStatus | null>(null);
const busy = signal<string | null>(null);
/** Ends the reload being watched (watchReload) without a verdict, or null. */
let stopWatching: (() => void) | null = null;

// An unsaved edit belongs to the session that made it: signing out drops it with everything else here.
onSignOut(() => {
  stopWatching?.();
  file.value = null;
  text.value = "";
  base.value = null;
  diagnostics.value = [];
  message.value = null;
  conflict.value = null;
  reloadAfterSave.value = true;
  reload.value = null;
  busy.value = null;
});

async function loadFile(): Promise<void> {
  const f = await api<ConfigFile>("api/config");
  file.value = f;
  text.value = f.content;
  base.value = f.version;
  diagnostics.value = [];
  conflict.value = null;
}

/** Problems from an error answer (validate or save), if it carries any. */
function problemsOf(err: unknown): Diagnostic[] | null {
  if (!(err instanceof ApiFailure)) return null;
  const details = err.body.diagnostic_details;
  return Array.isArray(details) && details.length > 0 ? (details as Diagnostic[]) : null;
}

/** Whether the reload this status describes is over (and, after a save, runs the saved version). */
const reloadOver = (s: ReloadStatus, expect: string | null): boolean =>
  (s.status === "ok" || s.status === "failed" || s.status === "idle") && (expect === null || s.status === "failed" || s.running_version === expect);

/**
 * Reads the reload status now and each time the app actor changes (the actor stream says when), until
 * the reload is over: no polling.
 */
async function watchReload(expect: string | null): Promise<void> {
  const finished = await new Promise<boolean | null>((resolve) => {
    const end = (verdict: boolean | null): void => {
      clearTimeout(timer);
      stop();
      stopWatching = null;
      resolve(verdict);
    };
    const timer = setTimeout(() => end(false), 60_000);
    const stop = loadOnChange(
      (id) => id === "app",
      async () => {
        const s = await api<ReloadStatus>("api/reload/status");
        reload.value = s;
        if (reloadOver(s, expect)) end(true);
      },
    );
    stopWatching = () => end(null);
  });
  // Signed out meanwhile: nothing to report to anyone.
  if (finished === null) return;
  if (!finished) {
    message.value = { tone: "warn", text: "The reload has not finished after 60 s; its status below keeps the last answer." };
    return;
  }
  if (reload.value?.status === "failed") message.value = { tone: "error", text: `Reload failed; the previous configuration keeps serving: ${reload.value.last_error ?? "unknown error"}` };
  else {
    message.value = { tone: "ok", text: expect === null ? "Reloaded." : `Saved version ${shortVersion(expect)} and reloaded: it is running now.` };
    void loadPlugins().catch(() => undefined);
  }
}

async function run(label: string, work: () => Promise<void>): Promise<void> {
  busy.value = label;
  try {
    await work();
  } catch (err) {
    // A 401 has signed the tab out (and cleared this page): nothing to show the next session.
    if (!(err instanceof ApiFailure && err.status === 401)) message.value = { tone: "error", text: errorText(err) };
  } finally {
    busy.value = null;
  }
}

const validate = (): Promise<void> =>
  run("validate", async () => {
    try {
      const out = await send<ConfigValid>("POST", "api/config/validate", { format: "yaml", content: text.value });
      diagnostics.value = [];
      message.value = { tone: "ok", text: `The configuration is valid (${out.plugin_count} plugins).` };
    } catch (err) {
      const problems = problemsOf(err);
      if (problems === null) throw err;
      diagnostics.value = problems;
      message.value = { tone: "error", text: `Not valid: ${problems.length} problem${problems.length === 1 ? "" : "s"}.` };
    }
  });

const save = (): Promise<void> =>
  run("save", async () => {
    const content = text.value;
    let saved: ConfigSaved;
    try {
      saved = await send<ConfigSaved>("PUT", "api/config", { format: "yaml", content, base_version: base.value, validate: true, reload: reloadAfterSave.value });
    } catch (err) {
      if (err instanceof ApiFailure && err.code === "config_conflict") {
        conflict.value = { mine: content, server: await api<ConfigFile>("api/config") };
        message.value = { tone: "error", text: "Not saved: the file changed on the server since you loaded it. Compare both versions below." };
        return;
      }
      const problems = problemsOf(err);
      if (problems !== null) {
        diagnostics.value = problems;
        message.value = { tone: "error", text: `Not saved: ${problems.length} problem${problems.length === 1 ? "" : "s"}.` };
        return;
      }
      // reload_busy / shutting_down after a save: the file was written, only the reload was not asked for.
      if (err instanceof ApiFailure && err.body.saved === true && typeof err.body.version === "string") {
        base.value = err.body.version;
        file.value = { ...(file.value as ConfigFile), content, version: err.body.version };
      }
      throw err;
    }
    diagnostics.value = [];
    base.value = saved.version;
    file.value = { ...(file.value as ConfigFile), content, version: saved.version, updated_at_ms: saved.updated_at_ms };
    message.value = { tone: "ok", text: `Saved version ${shortVersion(saved.version)} (${saved.plugin_count} plugins).` };
    if (reloadAfterSave.value) {
      message.value = { tone: "info", text: `Saved version ${shortVersion(saved.version)}; reloading…` };
      await watchReload(saved.version);
    }
  });

const reloadNow = (): Promise<void> =>
  run("reload", async () => {
    await send("POST", "api/reload");
    message.value = { tone: "info", text: "Reloading…" };
    await watchReload(null);
  });

function ConflictView({ mine, server }: { mine: string; server: ConfigFile }) {
  return (
    <section class="conflict card" aria-labelledby="conflict-title" data-testid="conflict">
      <h2 id="conflict-title">Save conflict</h2>
      <p>
        You edited version <code>{shortVersion(base.value)}</code>; the server now has version <code data-testid="conflict-server-version">{shortVersion(server.version)}</code>{" "}
        (written {when(server.updated_at_ms)}). Nothing was saved.
      </p>
      <div class="conflict-cols">
        <label>
          Your edit
          <textarea class="code" readOnly value={mine} wrap="off" data-testid="conflict-mine" />
        </label>
        <label>
          On the server now
          <textarea class="code" readOnly value={server.content} wrap="off" data-testid="conflict-server" />
        </label>
      </div>
      <div class="toolbar">
        <button type="button" onClick={() => void run("load", loadFile).then(() => (message.value = { tone: "info", text: "Loaded the server version; your edit was discarded." }))}>
          Discard my edit, load the server version
        </button>
        <button
          type="button"
          class="danger"
          onClick={() => {
            // An explicit choice: save this edit over the version just shown (a newer change conflicts again).
            base.value = server.version;
            file.value = server;
            conflict.value = null;
            void save();
          }}
        >
          Save my edit over version {shortVersion(server.version)}
        </button>
      </div>
    </section>
  );
}

export function ConfigPage() {
  const area = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    if (file.value === null) void run("load", loadFile);
    void api<ReloadStatus>("api/reload/status").then(
      (s) => (reload.value = s),
      () => undefined,
    );
  }, []);

  const f = file.value;
  const dirty = f !== null && text.value !== f.content;
  const marks = new Map<number, string>();
  for (const d of diagnostics.value) if (d.file === null || d.file === f?.path) marks.set(d.line, marks.has(d.line) ? `${marks.get(d.line)}; ${d.message}` : d.message);
  const r = reload.value;

  return (
    <section aria-labelledby="config-title">
      <header class="page-head">
        <h1 id="config-title">Configuration</h1>
        {f && (
          <span class="hint" data-testid="config-meta">
            <span class="mono">{f.path}</span> · version <code data-testid="config-version">{shortVersion(base.value)}</code> · written {when(f.updated_at_ms)}
            {dirty && <Badge tone="warn">unsaved changes</Badge>}
          </span>
        )}
      </header>
      <div class="toolbar">
        <button type="button" onClick={() => void validate()} disabled={busy.value !== null || f === null}>
          Validate
        </button>
        <button type="button" class="primary" onClick={() => void save()} disabled={busy.value !== null || f === null || conflict.value !== null} data-testid="config-save">
          Save
        </button>
        <label class="check">
          <input type="checkbox" checked={reloadAfterSave.value} onChange={(e) => (reloadAfterSave.value = (e.currentTarget).checked)} /> reload after saving
        </label>
        <button type="button" onClick={() => void run("load", loadFile)} disabled={busy.value !== null || !dirty}>
          Revert
        </button>
        <button type="button" onClick={() => void reloadNow()} disabled={busy.value !== null}>
          Reload now
        </button>
      </div>
      {busy.value && <p class="hint">Working: {busy.value}…</p>}
      {message.value && (
        <Notice tone={message.value.tone} testId="config-message">
          {message.value.text}
        </Notice>
      )}
      <DiagnosticList items={diagnostics.value} configPath={f?.path ?? null} onShow={(d) => showProblem(area.current, d)} />
      {conflict.value && <ConflictView mine={conflict.value.mine} server={conflict.value.server} />}
      {f && <ConfigEditor value={text.value} onInput={(v) => (text.value = v)} marks={marks} areaRef={area} />}
      <p class="hint" data-testid="reload-status">
        Reload status: {r ? <Badge tone={toneOf(r.status)}>{r.status}</Badge> : "…"}
        {r && (
          <>
            {" "}
            · last success {when(r.last_success_ms)}
            {" "}
            · running version <code>{shortVersion(r.running_version)}</code>
            {r.last_error && <> · last error: {r.last_error}</>}
          </>
        )}
      </p>
    </section>
  );
}
