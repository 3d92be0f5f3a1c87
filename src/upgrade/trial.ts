// What `sluice start` does about an upgrade in flight (src/upgrade/pending.ts): the first start of a
// new release is a trial that must reach serving within the deadline; a failed or late trial, or a
// start that finds an earlier trial unconfirmed, switches `current` back so the old release runs.

import { installLayout, type InstallLayout } from "./layout.js";
import { beginStart, confirmStart, readResult, rollBack, type PendingUpgrade, type UpgradeResult } from "./pending.js";

export interface StartGuard {
  /** The last upgrade's outcome, for GET /api/upgrade/status (null during a trial: it is not decided yet). */
  readonly restored: UpgradeResult | null;
  /** Set when this start must not run: `current` was switched back, the caller runs the old release. */
  readonly rolledBack: string | null;
  /** The start reached serving: a trial becomes the completed upgrade (returned, to show). */
  served(): UpgradeResult | null;
  /** The start failed: a trial is rolled back (true), anything else just fails (false). */
  failed(reason: string): boolean;
}

const NONE: StartGuard = { restored: null, rolledBack: null, served: () => null, failed: () => false };

/**
 * Checks the install directory this process runs from for a pending upgrade. `onDeadline` runs when
 * a trial has not reached serving in time, after `current` was switched back.
 */
export function guardStart(version: string, installDir: string | null, onDeadline: (reason: string) => void, now: () => number = Date.now): StartGuard {
  if (installDir === null) return NONE;
  const l = installLayout(installDir);
  const verdict = beginStart(l, version);
  if (verdict.kind === "none") {
    // A result about another version (e.g. before a rollback by hand) does not describe this install.
    const last = readResult(l);
    return { ...NONE, restored: last?.installed_version === version ? last : null };
  }
  if (verdict.kind === "rollback") {
    rollBack(l, verdict.pending, verdict.reason, now());
    return { ...NONE, rolledBack: `${verdict.reason}; switched back to ${verdict.pending.from_version}` };
  }
  return trial(l, verdict.pending, onDeadline, now);
}

function trial(l: InstallLayout, pending: PendingUpgrade, onDeadline: (reason: string) => void, now: () => number): StartGuard {
  let settled = false;
  const timer = setTimeout(() => {
    if (settled) return;
    settled = true;
    const reason = `release ${pending.to_version} did not reach serving within ${pending.start_deadline_ms / 1000}s (upgrade.start_deadline)`;
    rollBack(l, pending, reason, now());
    onDeadline(`${reason}; switched back to ${pending.from_version}`);
  }, pending.start_deadline_ms);
  timer.unref();
  return {
    restored: null,
    rolledBack: null,
    served() {
      if (settled) return null;
      settled = true;
      clearTimeout(timer);
      confirmStart(l, pending, now());
      return readResult(l);
    },
    failed(reason) {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      rollBack(l, pending, `release ${pending.to_version} failed to start: ${reason.split("\n")[0]}`, now());
      return true;
    },
  };
}
