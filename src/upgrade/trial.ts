// The trial of a new release, the first start after an upgrade (machines/upgrade.machine.ts:
// trial → confirmed | rollingBack). Here is its work: what `sluice start` reads from the pending
// marker before the App exists, and what the trial's states invoke once it does (provided by
// actors/app.actor.ts through the App): recording the confirmed upgrade, switching `current` back,
// and restarting into the release switched back to.

import type { UpgradeTrial } from "../../machines/upgrade.machine.js";
import { replaceProcess } from "../app/restart.js";
import { installLayout } from "./layout.js";
import { beginStart, confirmStart, readResult, rollBack, type UpgradeResult } from "./pending.js";

export interface UpgradeStart {
  /** The last upgrade's outcome, for GET /api/upgrade/status (null during a trial: it is not decided yet). */
  restored: UpgradeResult | null;
  /** This start is the new release's trial: the upgrade actor begins in `trial`. */
  trial: UpgradeTrial | null;
  /** Set when this start must not run: an earlier start of it never served, and `current` was switched back. */
  rolledBack: string | null;
}

const NONE: UpgradeStart = { restored: null, trial: null, rolledBack: null };

/** Reads the install directory this process runs from for an upgrade in flight, and records this start. */
export function readUpgradeStart(version: string, installDir: string | null, now: () => number = Date.now): UpgradeStart {
  if (installDir === null) return NONE;
  const l = installLayout(installDir);
  const verdict = beginStart(l, version, now());
  if (verdict.kind === "none") {
    // A result about another version (e.g. before a rollback by hand) does not describe this install.
    const last = readResult(l);
    return { ...NONE, restored: last?.installed_version === version ? last : null };
  }
  if (verdict.kind === "rollback") {
    // Before anything starts: the previous start of this release may have crashed the process.
    rollBack(l, verdict.pending, verdict.reason, now());
    return { ...NONE, rolledBack: `${verdict.reason}; switched back to ${verdict.pending.from_version}` };
  }
  const { from_version, to_version, started_at_ms, start_deadline_ms, deadline_at_ms } = verdict.pending;
  return { ...NONE, trial: { from_version, to_version, started_at_ms, start_deadline_ms, deadline_at_ms } };
}

/** The trial served: the upgrade is complete (marker removed); returns the outcome recorded. */
export function confirmTrial(installDir: string, trial: UpgradeTrial, now: number): UpgradeResult {
  const l = installLayout(installDir);
  confirmStart(l, trial, now);
  return readResult(l) ?? { state: "completed", started_at_ms: trial.started_at_ms, completed_at_ms: now, error: null, installed_version: trial.to_version, from_version: trial.from_version };
}

/** The trial failed or ran out of time: `current` points at the release upgraded from again, and the result says why. */
export function rollBackTrial(installDir: string, trial: UpgradeTrial, reason: string, now: number): void {
  rollBack(installLayout(installDir), trial, reason, now);
}

/**
 * Runs the release switched back to: a new process (or exit 75 for a supervisor), at once, since a
 * start past its deadline may never finish. `originalCwd`: where `sluice start` was run from.
 */
export function restartIntoPrevious(message: string, originalCwd: string): never {
  process.stderr.write(`error: ${message}\nerror: the upgrade did not complete; switched back to the previous release\n`);
  const h = replaceProcess(originalCwd);
  if (h.kind === "exit") process.exit(h.status);
  process.stderr.write(`restarted: the replacement process is running (pid ${h.pid ?? "unknown"})\n`);
  process.exit(1);
}
