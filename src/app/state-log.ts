// The app's lifecycle, reload status and upgrade task as log lines: every change of state, so even
// short-lived ones (pending, reloading) can be followed, and the outcome of each reload and upgrade.

import type { AppActor, UpgradeActor } from "../../actors/app.actor.js";
import { lifecycleState, type ReloadStatus } from "../../machines/app.machine.js";
import { upgradeState } from "../../machines/upgrade.machine.js";
import type { Logger } from "../observability/logger.js";

export function logStateChanges(actor: AppActor, upgradeActor: UpgradeActor, log: Logger): void {
  let app = "";
  let reload: ReloadStatus["status"] = "idle";
  actor.subscribe((snap) => {
    const state = snap.status === "done" ? "stopped" : lifecycleState(snap.value);
    if (state !== app) {
      app = state;
      log.info({ target: "control", actor: "app", state }, "state changed");
    }
    const r = snap.context.reload;
    if (r.status === reload) return;
    reload = r.status;
    log.info({ target: "control", actor: "reload", state: r.status }, "state changed");
    if (r.status === "ok") log.info({ target: "app", version: r.running_version, generation: snap.context.current }, "reload succeeded");
    if (r.status === "failed") log.warn({ target: "app", err: r.last_error }, "reload failed; the previous configuration keeps serving");
  });
  let upgrade = "";
  let task: unknown = null;
  upgradeActor.subscribe((snap) => {
    const from = task;
    task = snap.value;
    const state = upgradeState(snap.value);
    if (state !== upgrade) {
      upgrade = state;
      log.info({ target: "control", actor: "upgrade", state }, "state changed");
    }
    // A failed task of this process (a failed trial is logged as its rollback).
    if (snap.value === "failed" && from === "running") log.warn({ target: "upgrade", err: snap.context.error }, "upgrade failed; the running release is unchanged");
  });
}
