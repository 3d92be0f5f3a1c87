// The one table from a refusing guard to the API's answer. A handler asks an actor (actors/ask.ts);
// when the actor's snapshot cannot take the event, the guard that refused it names the error code,
// and ERROR_STATUS (errors.ts) gives the status. Handlers contain no status decisions. Guard names
// are unique across machines; test/unit/refusals.test.ts walks every machine and fails when an event
// an API route sends can be refused by a guard missing here (or in a state with no transition for it).

import { ActorGoneError, RefusedError } from "../../actors/ask.js";
import { VALIDATION_MAX_WAITING } from "../../machines/validation.machine.js";
import { ApiError, type ErrorCode } from "./errors.js";

interface Refusal {
  code: ErrorCode;
  message: string;
}

export const GUARD_REFUSALS: Record<string, Refusal> = {
  // app (machines/app.machine.ts)
  noStopRequested: { code: "shutdown_in_progress", message: "the application is already stopping" },
  notStopping: { code: "shutting_down", message: "the application is stopping; no reload can run" },
  reloadIdle: { code: "reload_busy", message: "a reload is already pending or in progress" },
  // upgrade (machines/upgrade.machine.ts)
  upgradeIdle: { code: "upgrade_in_progress", message: "an upgrade is already in progress" },
  installedRelease: {
    code: "upgrade_not_installed",
    message: "this process does not run from an installed release (<install_dir>/releases/<version> and a current symlink); install from a release artefact or set upgrade.install_dir",
  },
  // config (machines/config.machine.ts)
  saveIdle: { code: "config_save_busy", message: "another save is in progress; retry once it has finished" },
  // validation (machines/validation.machine.ts)
  validationQueueHasRoom: { code: "config_validation_busy", message: `a configuration validation is running and ${VALIDATION_MAX_WAITING} are waiting; retry shortly` },
  // provider:<tag> (machines/provider.machine.ts)
  providerIdle: { code: "provider_reload_busy", message: "this provider is already reloading; the request was not queued" },
  // cache:<tag> (machines/cache.machine.ts)
  cacheRunning: { code: "plugin_unavailable", message: "this cache is loading its dump or stopping (its plugin is being made or replaced); ask again" },
  cacheIdle: { code: "cache_busy", message: "another operation on this cache is running; retry once it has finished" },
  // dynamic-set:<tag> (machines/dynamic-set.machine.ts)
  dynamicSetRunning: { code: "plugin_unavailable", message: "this dynamic_domain_set is loading its file or stopping (its plugin is being made or replaced); ask again" },
  dynamicSetIdle: { code: "dynamic_set_busy", message: "another change to this dynamic_domain_set is running; retry once it has finished" },
  dynamicSetHasRoom: { code: "dynamic_set_full", message: "the rules do not fit: the set would hold more than its max_entries; nothing was added" },
  // clients:<tag> (machines/clients.machine.ts)
  clientsRunning: { code: "plugin_unavailable", message: "this clients provider is reading its state file or stopping (its plugin is being made or replaced); ask again" },
  clientsCurrent: { code: "plugin_unavailable", message: "a reload is replacing this clients provider (the new configuration's has taken over the state file); ask again" },
  clientNameFree: { code: "client_exists", message: "a declared client, a client named through the API or a group already has that name" },
  clientNotDeclared: { code: "client_declared", message: "that client is declared in the configuration: change it there (PUT /api/config, or edit the file and reload)" },
  clientIsNamed: { code: "client_not_found", message: "no client of that name was named through the API" },
  groupKnown: { code: "group_not_found", message: "no group of that name is declared in this clients provider" },
  // cron:<tag> and its jobs (machines/cron.machine.ts, machines/cron-job.machine.ts)
  cronAccepting: { code: "cron_unavailable", message: "this cron plugin is stopping (reload or shutdown); no run can start" },
  cronJobKnown: { code: "cron_job_not_found", message: "no job of that name in this cron plugin" },
  cronJobIdle: { code: "cron_job_already_running", message: "this job has an active run; the trigger was not queued" },
  cronJobNotRunning: { code: "cron_job_already_running", message: "this job has an active run; the trigger was not queued" },
  cronQueueHasRoom: { code: "cron_unavailable", message: "the manual-trigger queue of this cron plugin is full; retry once a run has finished" },
  // download:<tag> (machines/download.machine.ts)
  downloadIdle: { code: "download_busy", message: "a download batch of this plugin is running; retry once it has finished" },
  // recorder:<tag> (machines/recorder.machine.ts)
  recorderNoClearRunning: { code: "query_recorder_busy", message: "the records are already being deleted; retry once that has finished" },
  recorderWriterUp: { code: "query_recorder_unavailable", message: "the recorder's writer is not running (starting, or restarting after a failure); retry shortly" },
  recorderReadersOpen: { code: "query_recorder_unavailable", message: "this recorder is stopping (its plugin is being replaced by a reload, or the process is stopping); no read can start" },
  recorderReadersFree: { code: "query_recorder_unavailable", message: "too many reads of this recorder are already waiting; retry later" },
  // audit (machines/audit.machine.ts)
  auditOn: { code: "audit_unavailable", message: "the audit trail is off (api.http.audit: false)" },
  auditStoreOpen: { code: "audit_unavailable", message: "the audit store is not open (opening, or failed and to be tried again); entries wait in memory, retry shortly" },
};

/** An application actor that has stopped: the process is stopping. (Any other gone actor is a plugin's, replaced by a reload.) */
const GONE_REFUSALS: Record<string, Refusal> = {
  config: { code: "config_save_unavailable", message: "the application is stopping; GET /api/config shows what the file holds" },
  audit: { code: "audit_unavailable", message: "the management API is stopping; the audit trail is closed" },
  // A question for the data-plane workers (a cache's routes with workers) that none answered.
  workers: { code: "plugin_unavailable", message: "no data-plane worker is serving (they are starting or restarting); ask again" },
};

/** The API error for an actor's refusal; other errors pass through unchanged. */
export function refusalError(err: unknown): unknown {
  if (err instanceof RefusedError) {
    const r = err.guard !== null ? GUARD_REFUSALS[err.guard] : undefined;
    if (r) return new ApiError(r.code, r.message);
    // test/unit/refusals.test.ts walks every machine so that this cannot happen for an event the API sends.
    return new ApiError("internal_error", `${err.actor} refused ${err.event} ${err.guard === null ? "in a state without a transition for it" : `by guard ${err.guard}`}, which has no API code`);
  }
  if (err instanceof ActorGoneError) {
    const gone = GONE_REFUSALS[err.actor];
    return gone ? new ApiError(gone.code, gone.message) : new ApiError("plugin_unavailable", `${err.actor} is not running (the plugin was replaced by a reload, or the process is stopping)`);
  }
  return err;
}
