// A replica's side of `--config-from`: the pull before start (so the first generation already runs
// the primary's configuration), and the work of the follower actor `config-follow` (the app actor's
// child, machines/config-follow.machine.ts): a new version is saved through the config actor
// (validated, written atomically, as PUT /api/config does); the follower then asks the app actor
// for the reload (actors/reload-wait.ts). A configuration that does not validate is never written:
// the replica keeps the last good one, logs why, and its reload status shows it. Pulled text is
// never parsed on the main thread before a validation worker (src/app/validate-pool.ts) accepted
// it within its heap and time caps.
import { readFile } from "node:fs/promises";
import type { AnyActorRef } from "xstate";
import { RefusedError, ask } from "../../actors/ask.js";
import type { ConfigActor } from "../../actors/app.actor.js";
import type { ApplyResult, Fetched, FollowContext, FollowInput } from "../../machines/config-follow.machine.js";
import type { SaveResult } from "../../machines/config.machine.js";
import { replaceFileAtomically } from "../config/atomic-file.js";
import { configLimits, type ConfigLimits } from "../config/limits.js";
import { contentVersion, loadConfigFile, withoutBom, type SluiceConfig } from "../config/load.js";
import { validationFailure } from "../config/validation.js";
import { ConfigValidator } from "../app/validate-pool.js";
import { silentLogger, type Logger } from "../observability/logger.js";
import type { Catalog } from "../registry/catalog.js";
import { fetchConfig, sourceName, type ConfigSource } from "./config-source.js";

/** What the pull before start came to. */
export interface InitialPull {
  /** The primary's version, when it answered. */
  version: string | null;
  /** Its configuration is the local file now. */
  applied: boolean;
  error: string | null;
}

export interface Following {
  source: ConfigSource;
  initial: InitialPull;
}

const short = (v: string): string => v.slice(0, 12);

/** Save failures that mean "not now" rather than "this configuration is wrong". */
const NOT_NOW = new Set(["config_validation_busy", "config_save_failed", "config_save_unavailable"]);

/** The limits of the configuration this replica has now (its last good copy), or the defaults without one. */
function localLimits(configPath: string, env: NodeJS.ProcessEnv): { limits: ConfigLimits; local: boolean } {
  try {
    return { limits: configLimits(loadConfigFile(configPath, { env }).api?.limits), local: true };
  } catch {
    return { limits: configLimits(undefined), local: false };
  }
}

/**
 * Pulls the primary's configuration (within --config-from-timeout and the local copy's body_bytes),
 * validates it in a worker under the local copy's heap and time caps, and writes it to `configPath`
 * when it validates; never throws (the local file is the fallback; without one, start-up then fails
 * saying why).
 */
export async function initialPull(source: ConfigSource, configPath: string, catalog: Catalog, env: NodeJS.ProcessEnv): Promise<InitialPull> {
  const { limits, local } = localLimits(configPath, env);
  const noCopy = local ? "" : `; there is no usable local copy at ${configPath} to start from`;
  let fetched: Fetched;
  try {
    fetched = await fetchConfig(source, limits.bodyBytes);
  } catch (err) {
    return { version: null, applied: false, error: `the primary ${sourceName(source)} could not be read: ${(err as Error).message}${noCopy}` };
  }
  const validator = new ConfigValidator(() => limits, catalog.build, silentLogger());
  try {
    const outcome = await validator.run({ kind: "save", text: fetched.content, path: configPath, validate: true, env: { ...env } });
    if (!outcome.ok) return { version: fetched.version, applied: false, error: refusal(source, fetched.version, validationFailure(outcome, "config_validate_failed", limits).message) + noCopy };
  } finally {
    await validator.close();
  }
  let current: string | null = null;
  try {
    current = contentVersion(withoutBom(await readFile(configPath, "utf8")));
  } catch {
    /* no local copy yet */
  }
  if (current !== fetched.version) await replaceFileAtomically(configPath, fetched.content);
  return { version: fetched.version, applied: true, error: null };
}

function refusal(source: ConfigSource, version: string, why: string): string {
  return `configuration ${short(version)} from ${sourceName(source)} refused; the last good configuration keeps serving: ${why}`;
}

export interface FollowHost {
  readonly configActor: ConfigActor;
  readonly log: Logger;
}

/** One poll: the primary's configuration, capped by the body_bytes of the configuration in force. */
export function fetchPrimary(source: ConfigSource, config: SluiceConfig, signal: AbortSignal): Promise<Fetched> {
  return fetchConfig(source, configLimits(config.api?.limits).bodyBytes, signal);
}

/** Saves one version through the same actor as PUT /api/config (the follower asks for the reload). */
export async function savePulled(host: FollowHost, source: ConfigSource, f: Fetched): Promise<ApplyResult> {
  let result: SaveResult;
  try {
    result = (await ask(host.configActor, { type: "SAVE", request: { content: f.content, baseVersion: null, validate: true } })) as SaveResult;
  } catch (err) {
    if (err instanceof RefusedError) return { outcome: "busy", error: "a configuration save was running; trying again at the next poll" };
    throw err;
  }
  if (!result.ok) {
    if (NOT_NOW.has(result.code)) return { outcome: "busy", error: `${result.code}: ${result.message}` };
    const error = refusal(source, f.version, result.message);
    host.log.warn({ target: "config", source: sourceName(source), version: f.version, err: result.message }, "configuration from the primary refused; the last good configuration keeps serving");
    return { outcome: "refused", error };
  }
  host.log.info({ target: "config", source: sourceName(source), version: f.version }, "configuration from the primary saved; reloading");
  return { outcome: "applied" };
}

/** What the follower actor of a replica started with --config-from starts from. */
export function followInput(following: Following): FollowInput {
  const { source, initial } = following;
  return { source: sourceName(source), interval_ms: source.intervalMs, clock: Date.now, version: initial.version, applied: initial.applied, error: initial.error };
}

/** The follower as /api/reload/status shows it. */
export function followRecord(actor: AnyActorRef): Record<string, unknown> {
  const snap = actor.getSnapshot() as { value: unknown; context: FollowContext };
  const c = snap.context;
  return {
    source: c.source,
    state: typeof snap.value === "string" ? snap.value : "unknown",
    interval_ms: c.interval_ms,
    version: c.version,
    applied_version: c.applied_version,
    refused_version: c.refused_version,
    last_poll_ms: c.last_poll_ms,
    last_applied_ms: c.last_applied_ms,
    last_error: c.last_error,
    polls: c.polls,
  };
}
