// The pending marker and the last result. Before `current` is switched, upgrade/pending.json names
// the release switched from and to; the new release removes it once it serves. A start that finds
// the marker for its own version with an attempt already made (the previous start never reached
// serving), or a start that fails or misses the deadline, switches `current` back and runs the old
// release again. upgrade/result.json keeps the outcome for GET /api/upgrade/status after the restart.

import { rmSync } from "node:fs";
import { join } from "node:path";
import { linkedVersion, pointLink, readJson, writeFileAtomic, type InstallLayout } from "./layout.js";

export interface PendingUpgrade {
  from_version: string;
  to_version: string;
  started_at_ms: number;
  /** Time the new release has to reach serving, counted from its start. */
  start_deadline_ms: number;
  /** Starts of the new release so far. */
  attempts: number;
  /** Unix ms by which the trial start must serve: written when that start is recorded (the upgrade machine's `after` counts to it). */
  deadline_at_ms?: number;
}

/** What the outcome records need of a pending upgrade. */
export type UpgradeStep = Pick<PendingUpgrade, "from_version" | "to_version" | "started_at_ms">;

export interface UpgradeResult {
  state: "completed" | "failed";
  started_at_ms: number | null;
  completed_at_ms: number;
  error: string | null;
  installed_version: string;
  from_version: string | null;
}

export const pendingPath = (l: InstallLayout): string => join(l.state, "pending.json");
export const resultPath = (l: InstallLayout): string => join(l.state, "result.json");

export function readPending(l: InstallLayout): PendingUpgrade | null {
  return readJson<PendingUpgrade>(pendingPath(l));
}

export function writePending(l: InstallLayout, p: PendingUpgrade): void {
  writeFileAtomic(pendingPath(l), JSON.stringify(p));
}

export function clearPending(l: InstallLayout): void {
  rmSync(pendingPath(l), { force: true });
}

export function readResult(l: InstallLayout): UpgradeResult | null {
  return readJson<UpgradeResult>(resultPath(l));
}

export function writeResult(l: InstallLayout, r: UpgradeResult): void {
  writeFileAtomic(resultPath(l), JSON.stringify(r));
}

/** What a starting process must do about an upgrade in flight. */
export type TrialVerdict =
  /** No upgrade pending for this version. */
  | { kind: "none" }
  /** This start is the new release's trial: confirm once serving, roll back past the deadline. */
  | { kind: "trial"; pending: PendingUpgrade & { deadline_at_ms: number } }
  /** A previous start of this release failed: switch back now and run the old release. */
  | { kind: "rollback"; pending: PendingUpgrade; reason: string };

/** Reads the marker at start and records this attempt, with its deadline on the clock `now`. */
export function beginStart(l: InstallLayout, version: string, now: number): TrialVerdict {
  const pending = readPending(l);
  if (!pending) return { kind: "none" };
  if (pending.to_version !== version || linkedVersion(l.current) !== version) {
    // Rolled back by hand, or the switch never happened: the marker is stale.
    clearPending(l);
    return { kind: "none" };
  }
  if (pending.attempts > 0) return { kind: "rollback", pending, reason: `release ${version} did not reach serving after the upgrade (its previous start failed or was cut short)` };
  const trial = { ...pending, attempts: pending.attempts + 1, deadline_at_ms: now + pending.start_deadline_ms };
  writePending(l, trial);
  return { kind: "trial", pending: trial };
}

/** The new release serves: the upgrade is complete. */
export function confirmStart(l: InstallLayout, pending: UpgradeStep, now: number): void {
  writeResult(l, { state: "completed", started_at_ms: pending.started_at_ms, completed_at_ms: now, error: null, installed_version: pending.to_version, from_version: pending.from_version });
  clearPending(l);
}

/** Switches `current` back to the release upgraded from and records why. */
export function rollBack(l: InstallLayout, pending: UpgradeStep, reason: string, now: number): void {
  pointLink(l.current, pending.from_version);
  pointLink(l.previous, pending.to_version);
  writeResult(l, { state: "failed", started_at_ms: pending.started_at_ms, completed_at_ms: now, error: `${reason}; rolled back to ${pending.from_version}`, installed_version: pending.from_version, from_version: pending.to_version });
  clearPending(l);
}
