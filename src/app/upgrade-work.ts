// The upgrade actor's work in this process (machines/upgrade.machine.ts, provided by
// actors/app.actor.ts): one upgrade task up to the switch of `current`, and — when this start is a
// new release's trial — recording that it served, or switching back and restarting into the
// previous release.

import type { RestoredUpgrade, UpgradeOutcome, UpgradeTrial } from "../../machines/upgrade.machine.js";
import type { Logger } from "../observability/logger.js";
import type { UpgradeOptions } from "../upgrade/options.js";
import { confirmTrial, restartIntoPrevious, rollBackTrial } from "../upgrade/trial.js";

/** Where a trial's outcome is recorded; null when this start is not a trial. */
export interface TrialInstall {
  installDir: string;
  originalCwd: string;
}

export interface UpgradeHost {
  log: Logger;
  configPath(): string;
  baseDir: string;
  /** The app would take a restart now (it is not already stopping). */
  canRestart(): boolean;
}

export class UpgradeWork {
  constructor(
    private readonly host: UpgradeHost,
    private readonly install: TrialInstall | null,
  ) {}

  /** Runs one upgrade task with settings the API resolved (src/upgrade/options.ts). */
  async apply(request: unknown): Promise<UpgradeOutcome> {
    const { applyUpgrade } = await import("../upgrade/engine.js");
    const { log, baseDir } = this.host;
    return applyUpgrade(request as UpgradeOptions, { log, configPath: this.host.configPath(), baseDir, canRestart: () => this.host.canRestart() });
  }

  /** The trial served: the completed upgrade is recorded. */
  confirmTrial(trial: UpgradeTrial): RestoredUpgrade {
    const result = confirmTrial(this.trialInstall().installDir, trial, Date.now());
    this.host.log.info({ target: "upgrade", from: trial.from_version, version: trial.to_version }, "upgrade complete: the new release is serving");
    return result;
  }

  /** The trial failed: `current` goes back to the previous release, with the reason recorded. */
  rollBack(trial: UpgradeTrial, reason: string): void {
    rollBackTrial(this.trialInstall().installDir, trial, reason, Date.now());
    this.host.log.error({ target: "upgrade", err: reason, version: trial.from_version }, "upgrade rolled back: the previous release runs after the restart");
  }

  /** Runs the release switched back to, now (this process ends). */
  restartIntoPrevious(trial: UpgradeTrial, reason: string): void {
    restartIntoPrevious(`${reason}; switched back to ${trial.from_version}`, this.trialInstall().originalCwd);
  }

  private trialInstall(): TrialInstall {
    if (!this.install) throw new Error("this start is not an upgrade trial");
    return this.install;
  }
}
