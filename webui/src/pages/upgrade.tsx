// The System page's Upgrade card (builds with the upgrade feature): check (POST /api/upgrade/check:
// current and latest version, update available, asset, release link) and install (POST
// /api/upgrade/apply, 202), then GET /api/upgrade/status followed through running → restarting.
// While the service restarts the card waits for GET /api/health to answer again and shows the version
// serving now. A release host token typed here lives in this module's memory only: never stored,
// never logged, gone when the tab closes or reloads.

import { signal } from "@preact/signals";
import { useEffect } from "preact/hooks";
import { ApiFailure, api, errorText, onSignOut, refusalText, send } from "../api";
import { Badge, Facts, Notice, type Tone } from "../components/ui";
import { loadCapabilities } from "../features";
import { when } from "../format";
import type { Health, UpgradeCheck, UpgradeStatus } from "../shapes";

const STATE_TONE: Record<UpgradeStatus["state"], Tone> = { idle: "muted", running: "warn", restarting: "warn", completed: "ok", skipped: "ok", failed: "error" };

type Phase = "idle" | "checking" | "confirm" | "applying" | "restarting";

const POLL_MS = 500;
const HEALTH_MS = 1000;
/** How long the card waits for the service to come back after its restart. */
const RESTART_WAIT_MS = 180_000;

// Module state: the card keeps its check and a running install across page changes.
const target = signal("");
const prerelease = signal(false);
/** Memory only, on purpose (see the header comment). */
const token = signal("");
const check = signal<UpgradeCheck | null>(null);
const status = signal<UpgradeStatus | null>(null);
const phase = signal<Phase>("idle");
/** Task states seen while following an install, in order. */
const seen = signal<string[]>([]);
const message = signal<{ tone: Tone; text: string } | null>(null);
/** Bumped when the service is back from a restart, so the System page reads its build again. */
export const restarts = signal(0);
/** Bumped at sign-out: a task followed for the previous session stops being followed. */
let session = 0;

// The token above all: it must not outlive the session it was typed in.
onSignOut(() => {
  session++;
  target.value = "";
  prerelease.value = false;
  token.value = "";
  check.value = null;
  status.value = null;
  phase.value = "idle";
  seen.value = [];
  message.value = null;
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function requestBody(): Record<string, unknown> {
  const b: Record<string, unknown> = {};
  const t = target.value.trim();
  if (t !== "" && t !== "latest") b.target = t;
  if (prerelease.value) b.allow_prerelease = true;
  if (token.value !== "") b.release_host_token = token.value;
  return b;
}

const readStatus = (): Promise<UpgradeStatus> => api<UpgradeStatus>("api/upgrade/status", { signal: AbortSignal.timeout(5000) });

function note(state: string): void {
  if (seen.value[seen.value.length - 1] !== state) seen.value = [...seen.value, state];
}

/** The service is answering again: the version it runs (null while it is not ready). */
async function serving(): Promise<string | null> {
  try {
    const h = await api<Health>("api/health", { signal: AbortSignal.timeout(3000) });
    return h.status === "ok" ? h.version : null;
  } catch {
    return null;
  }
}

async function runCheck(): Promise<void> {
  phase.value = "checking";
  message.value = null;
  try {
    check.value = await send<UpgradeCheck>("POST", "api/upgrade/check", requestBody());
  } catch (err) {
    check.value = null;
    message.value = { tone: "error", text: refusalText(err) };
  } finally {
    phase.value = "idle";
  }
}

/** Reads the task until it ends in this process ("ended") or the process stops answering ("gone"); "ended" too once `mine` is not the session any more. */
async function pollTask(mine: number): Promise<"ended" | "gone"> {
  for (;;) {
    let s: UpgradeStatus;
    try {
      s = await readStatus();
    } catch (err) {
      if (mine !== session) return "ended";
      // A client error (401 included) ends the wait; no answer or a 5xx means the process is going away.
      if (err instanceof ApiFailure && err.status < 500) {
        message.value = { tone: "error", text: refusalText(err) };
        return "ended";
      }
      return "gone";
    }
    if (mine !== session) return "ended";
    status.value = s;
    note(s.state);
    if (s.state === "failed") message.value = { tone: "error", text: `The upgrade failed; ${s.installed_version} keeps running. ${s.error ?? ""}` };
    else if (s.state === "skipped") message.value = { tone: "info", text: `Nothing to install: ${s.target_version ?? s.installed_version} is already the newest release.` };
    if (s.state !== "running" && s.state !== "restarting") return "ended";
    await sleep(POLL_MS);
  }
}

/** Waits for GET /api/health to answer ok again; the version serving, or null after RESTART_WAIT_MS. */
async function waitForService(mine: number): Promise<string | null> {
  const deadline = Date.now() + RESTART_WAIT_MS;
  while (Date.now() < deadline && mine === session) {
    await sleep(HEALTH_MS);
    const version = await serving();
    if (version !== null) return version;
  }
  return null;
}

/** Follows the task of this process until it ends here, or until the service is back from its restart. */
async function follow(fromVersion: string): Promise<void> {
  const mine = session;
  for (;;) {
    phase.value = "applying";
    if ((await pollTask(mine)) === "ended") {
      phase.value = "idle";
      return;
    }
    phase.value = "restarting";
    note("restart");
    const version = await waitForService(mine);
    // Signed out meanwhile: the next session starts from a clean card.
    if (mine !== session) return;
    if (version === null) {
      phase.value = "idle";
      message.value = { tone: "error", text: `The service has not answered for ${RESTART_WAIT_MS / 1000} s since its restart; check it on the host (its log, systemd).` };
      return;
    }
    const after = await readStatus().catch(() => null);
    if (mine !== session) return;
    // The same process still at work (it only missed an answer): keep following it.
    if (version === fromVersion && (after?.state === "running" || after?.state === "restarting")) continue;
    status.value = after;
    if (after) note(after.state);
    restarts.value++;
    void loadCapabilities().catch(() => undefined);
    phase.value = "idle";
    check.value = null;
    message.value =
      version !== fromVersion
        ? { tone: "ok", text: `Upgraded: Sluice ${version} is serving now (was ${fromVersion}).` }
        : { tone: "error", text: `The service restarted but still runs ${version}. ${after?.error ?? ""}` };
    return;
  }
}

async function apply(fromVersion: string): Promise<void> {
  phase.value = "applying";
  seen.value = [];
  message.value = null;
  try {
    await send("POST", "api/upgrade/apply", requestBody());
  } catch (err) {
    phase.value = "idle";
    message.value = { tone: "error", text: refusalText(err) };
    return;
  }
  note("accepted");
  await follow(fromVersion);
}

function InstallControls({ c, s }: { c: UpgradeCheck; s: UpgradeStatus | null }) {
  if (!c.update_available) return <Notice tone="ok">{c.current_version} is the newest release.</Notice>;
  if (c.asset_name === null) return <Notice tone="warn">Release {c.latest_version} has no artefact for this platform, so it cannot be installed here.</Notice>;
  if (s?.installed_release === false) {
    return (
      <p class="hint">
        This process does not run from an installed release (<code>&lt;install_dir&gt;/releases/&lt;version&gt;</code> with a <code>current</code> link), and{" "}
        <code>upgrade.install_dir</code> is not set: it cannot install {c.latest_version} itself. Install from the release artefact instead.
      </p>
    );
  }
  if (phase.value === "confirm") {
    return (
      <span class="confirm">
        <button type="button" class="danger" onClick={() => void apply(c.current_version)}>
          Yes, install {c.latest_version} and restart
        </button>
        <button type="button" onClick={() => (phase.value = "idle")}>
          Cancel
        </button>
      </span>
    );
  }
  return (
    <button type="button" class="primary" disabled={phase.value !== "idle"} onClick={() => (phase.value = "confirm")}>
      Install {c.latest_version}…
    </button>
  );
}

export function UpgradeCard() {
  useEffect(() => {
    if (phase.value !== "idle") return;
    readStatus().then(
      (s) => {
        status.value = s;
        // A task started elsewhere (another tab, curl) is followed here too.
        if ((s.state === "running" || s.state === "restarting") && s.current_version) void follow(s.current_version);
      },
      (err: unknown) => (message.value = { tone: "error", text: errorText(err) }),
    );
  }, []);

  const c = check.value;
  const s = status.value;
  const busy = phase.value !== "idle" && phase.value !== "confirm";
  return (
    <article class="card wide" aria-labelledby="upgrade-title" data-testid="upgrade">
      <h2 id="upgrade-title">Upgrade</h2>
      {/* No <form>: a submitted password field would invite the browser to save the token. */}
      <div class="toolbar">
        <button type="button" onClick={() => void runCheck()} disabled={busy || phase.value === "checking"}>
          {phase.value === "checking" ? "Checking…" : "Check for updates"}
        </button>
      </div>
      <details class="upgrade-options">
        <summary>Options</summary>
        <div class="inline-form">
          <label>
            Release{" "}
            <input value={target.value} placeholder="latest" onInput={(e) => (target.value = e.currentTarget.value)} aria-label="Release to check or install (latest or a tag such as v0.2.0)" />
          </label>
          <label class="check">
            <input type="checkbox" checked={prerelease.value} onChange={(e) => (prerelease.value = e.currentTarget.checked)} /> Allow pre-releases
          </label>
          <label>
            Release host token{" "}
            <input type="password" autocomplete="off" value={token.value} onInput={(e) => (token.value = e.currentTarget.value)} data-testid="upgrade-token" />
          </label>
        </div>
        <p class="hint">The token is sent with each check and install, and the server passes it to upgrade.release_api only. This page keeps it in memory: never stored in the browser, never logged.</p>
      </details>
      {c && (
        <>
          <Facts
            testId="upgrade-check"
            rows={[
              ["Current version", <span data-testid="upgrade-current">{c.current_version}</span>],
              ["Latest version", <span data-testid="upgrade-latest">{c.latest_version}</span>],
              ["Update available", <Badge tone={c.update_available ? "info" : "ok"}>{c.update_available ? "yes" : "no"}</Badge>],
              ["Asset", c.asset_name === null ? "none for this platform" : <span class="mono">{c.asset_name}</span>],
              [
                "Release",
                <a href={c.release_url} target="_blank" rel="noopener noreferrer">
                  {c.release_url}
                </a>,
              ],
            ]}
          />
          <div class="toolbar">
            <InstallControls c={c} s={s} />
          </div>
        </>
      )}
      {seen.value.length > 0 && (
        <p class="hint" data-testid="upgrade-progress" data-states={seen.value.join(" ")}>
          Progress: {seen.value.join(" → ")}
          {phase.value === "restarting" && " (waiting for the service to answer again…)"}
        </p>
      )}
      {message.value && (
        <Notice tone={message.value.tone} testId="upgrade-message">
          {message.value.text}
        </Notice>
      )}
      {s && (
        <>
          <h3 class="subhead">Latest task</h3>
          <Facts
            testId="upgrade-status"
            rows={[
              ["State", <Badge tone={STATE_TONE[s.state]}>{s.state}</Badge>],
              ["Running version", <span data-testid="upgrade-running-version">{s.current_version ?? "—"}</span>],
              ["Installed version", s.installed_version],
              ["Target version", s.target_version ?? "—"],
              ["Started", when(s.started_at_ms)],
              ["Finished", when(s.completed_at_ms)],
              ["Error", s.error ?? "none"],
            ]}
          />
        </>
      )}
    </article>
  );
}
