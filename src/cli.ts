#!/usr/bin/env node
// sluice start|check -c FILE [-d DIR] [-l LEVEL]; sluice upgrade check|apply|rollback; sluice probe upstream ADDRESS...;
// sluice passwd [--cost LN]; sluice backup|restore ...; sluice import SOURCE PATH [-o DIR] [--force]

import { resolve } from "node:path";
import { parseOptions, UsageError, type OptionSpec } from "./cli-args.js";
import { App, checkConfig, describe } from "./app/app.js";
import { tuneHeapGrowth } from "./app/heap.js";
import { replaceProcess, type Handover } from "./app/restart.js";
import { selfTest } from "./app/self-test.js";
import { AUTH_ENV, configSource, DEFAULT_POLL, DEFAULT_TIMEOUT, SourceError, type ConfigSource } from "./cluster/config-source.js";
import { initialPull, type Following } from "./cluster/follow.js";
import { PROBE_HELP, runProbeCommand } from "./probe/command.js";
import { PASSWD_HELP, runPasswdCommand } from "./api/auth/passwd-command.js";
import { BACKUP_HELP, RESTORE_HELP, runBackupCommand, runRestoreCommand } from "./backup/command.js";
import { runUpgradeCommand, UPGRADE_HELP } from "./upgrade/cli.js";
import { IMPORT_HELP, runImportCommand } from "./import/cli.js";
import { detectInstallDir } from "./upgrade/layout.js";
import { readUpgradeStart, restartIntoPrevious, rollBackTrial } from "./upgrade/trial.js";
import { VERSION } from "./version.js";
import { ConfigError, formatDiagnostic } from "./config/diagnostics.js";
import { LOG_LEVELS, type LogLevel } from "./config/schema.js";
import { createCatalog } from "./plugins/catalog.js";
import { PluginInitError } from "./registry/runtime.js";
import { notifyReady } from "./app/sd-notify.js";

const HELP = `sluice ${VERSION} — a DNS policy engine

Usage:
  sluice start [-c FILE] [-d DIR] [-l LEVEL] [--config-from URL ...]
                                               run the DNS service in the foreground
  sluice check [-c FILE] [-d DIR] [--self-test] validate a configuration and exit
  sluice upgrade check|apply|rollback ...      releases: see sluice upgrade --help
  sluice probe upstream ADDRESS... [options]   which protocols an upstream answers, and how fast:
                                               see sluice probe --help
  sluice passwd [--cost LN]                    print a password hash for api.http.auth.users: the
                                               password is typed (not shown) or piped on stdin,
                                               never given as an argument; see sluice passwd --help
  sluice backup [-c FILE] [-d DIR] [-o ARCHIVE] [--with-queries]
                                               one .tar.gz of the configuration, its includes and
                                               every data file it names: see sluice backup --help
  sluice restore ARCHIVE -d DIR [--force]      check a backup and put its files back: see
                                               sluice restore --help
  sluice import <source> <file or dir> [-o DIR] [--force]
                                               write a configuration from AdGuard Home's, Pi-hole's,
                                               blocky's or mosdns's: see sluice import --help
  sluice --help | --version

Options:
  -c, --config FILE        configuration file (default: sluice.yaml)
  -d, --working-dir DIR    directory that relative paths resolve against (default: current)
  -l, --log-level LEVEL    override log.level: ${LOG_LEVELS.join(", ")}
      --self-test          check also loads the native addons (what an upgrade runs on a new release)

A replica of a primary (start only):
      --config-from URL    the primary's API (http:// or https://): its configuration is pulled into
                           FILE before start and followed; a version that does not validate is refused
      --config-from-auth-file FILE
                           the primary's API credentials, user:password on the first line
                           (or the environment variable ${AUTH_ENV}); never printed
      --config-from-ca FILE  PEM CA that signed an https primary's certificate
      --config-poll DURATION how often the primary is asked (default ${DEFAULT_POLL}, 200ms to 1h)
      --config-from-timeout DURATION
                           the whole pull ends within this, or counts as failed (default ${DEFAULT_TIMEOUT})

check exits 0 when the configuration is valid, 1 with every problem listed otherwise.
SIGINT and SIGTERM stop the service gracefully. SIGHUP reloads the configuration file, as
POST /api/reload does (systemctl reload sluice sends it). Started by systemd with Type=notify
(NOTIFY_SOCKET set), the service reports itself ready with systemd-notify once it serves.
`;

interface Options {
  command: "start" | "check";
  config: string;
  dir: string;
  level?: LogLevel;
  selfTest?: boolean;
  configFrom?: string;
  configFromAuthFile?: string;
  configFromCa?: string;
  configPoll?: string;
  configFromTimeout?: string;
}

/** The options each command takes. */
const COMMON: OptionSpec = { config: { type: "string", short: "c" }, "working-dir": { type: "string", short: "d" } };
const COMMAND_OPTIONS: Record<"start" | "check", OptionSpec> = {
  start: {
    ...COMMON,
    "log-level": { type: "string", short: "l" },
    "config-from": { type: "string" },
    "config-from-auth-file": { type: "string" },
    "config-from-ca": { type: "string" },
    "config-poll": { type: "string" },
    "config-from-timeout": { type: "string" },
  },
  check: { ...COMMON, "self-test": { type: "boolean" } },
};

function parseCommandLine(argv: string[]): Options | "help" | "version" {
  if (argv.includes("--help") || argv.includes("-h") || argv.length === 0) return "help";
  if (argv.includes("--version") || argv.includes("-V")) return "version";
  const [command, ...rest] = argv;
  if (command !== "start" && command !== "check") throw new UsageError(`unknown command '${command}'`);
  const v = parseOptions(rest, COMMAND_OPTIONS[command]);
  const str = (name: string): string | undefined => v[name] as string | undefined;
  const path = (name: string): string | undefined => (str(name) === undefined ? undefined : resolve(str(name) as string));
  const level = str("log-level")?.toLowerCase();
  if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`log level must be one of ${LOG_LEVELS.join(", ")}`);
  return {
    command,
    config: str("config") ?? "sluice.yaml",
    dir: path("working-dir") ?? process.cwd(),
    level: level as LogLevel | undefined,
    selfTest: v["self-test"] === true,
    configFrom: str("config-from"),
    configFromAuthFile: path("config-from-auth-file"),
    configFromCa: path("config-from-ca"),
    configPoll: str("config-poll"),
    configFromTimeout: str("config-from-timeout"),
  };
}

function report(err: unknown): void {
  if (err instanceof ConfigError || err instanceof PluginInitError) {
    const diags = err instanceof ConfigError ? err.diagnostics : err.diagnostics;
    if (diags.length === 0) process.stderr.write(`error: ${err.message}\n`);
    for (const d of diags) process.stderr.write(formatDiagnostic(d) + "\n");
  } else {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  }
}

/**
 * A subcommand: its help (`--help`; also, with exit 2, when it needs arguments and got none), usage
 * mistakes (exit 2, with the help) and refusals (exit 1).
 */
async function subcommand(argv: string[], help: string, run: (argv: string[]) => Promise<number>, needsArguments: boolean): Promise<number> {
  if ((needsArguments && argv.length === 0) || argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(help);
    return argv.length === 0 && needsArguments ? 2 : 0;
  }
  try {
    return await run(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n\n${help}`);
      return 2;
    }
    report(err);
    return 1;
  }
}

/** Subcommands by name: help, runner, and whether no argument at all is a usage mistake. */
const SUBCOMMANDS: Record<string, [help: string, run: (argv: string[]) => Promise<number>, needsArguments: boolean]> = {
  upgrade: [UPGRADE_HELP, runUpgradeCommand, true],
  probe: [PROBE_HELP, runProbeCommand, true],
  import: [IMPORT_HELP, runImportCommand, true],
  passwd: [PASSWD_HELP, runPasswdCommand, false],
  backup: [BACKUP_HELP, runBackupCommand, false],
  restore: [RESTORE_HELP, runRestoreCommand, false],
};

/** Runs the program again (or leaves that to the supervisor); the exit status of this process. */
function handOver(originalCwd: string, log?: App["log"]): number {
  const h: Handover = replaceProcess(originalCwd);
  if (h.kind === "exit") return h.status;
  if (log) log.info({ target: "app", pid: h.pid }, "restarted: the replacement process is running");
  else process.stderr.write(`restarted: the replacement process is running (pid ${h.pid ?? "unknown"})\n`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const sub = argv[0] !== undefined && Object.hasOwn(SUBCOMMANDS, argv[0]) ? SUBCOMMANDS[argv[0]] : undefined;
  if (sub) return subcommand(argv.slice(1), ...sub);
  let opts: ReturnType<typeof parseCommandLine>;
  try {
    opts = parseCommandLine(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`error: ${err.message}\n\n${HELP}`);
    return 2;
  }
  if (opts === "help") {
    process.stdout.write(HELP);
    return 0;
  }
  if (opts === "version") {
    process.stdout.write(`sluice ${VERSION}\n`);
    return 0;
  }
  const configPath = resolve(opts.dir, opts.config);
  if (opts.command === "check") {
    try {
      const { analysis } = checkConfig(configPath, createCatalog());
      process.stdout.write(`configuration is valid: ${configPath} (${analysis.plugins.length} plugins)\n`);
      if (opts.selfTest) process.stdout.write(`self-test passed: ${await selfTest()}\n`);
      return 0;
    } catch (err) {
      report(err);
      return 1;
    }
  }
  if (opts.configFrom === undefined && (opts.configFromAuthFile ?? opts.configFromCa ?? opts.configPoll ?? opts.configFromTimeout) !== undefined) {
    process.stderr.write("error: --config-from-auth-file, --config-from-ca, --config-poll and --config-from-timeout go with --config-from\n");
    return 2;
  }
  let follow: Following | undefined;
  if (opts.configFrom !== undefined) {
    let source: ConfigSource;
    try {
      source = configSource({ url: opts.configFrom, authFile: opts.configFromAuthFile, caFile: opts.configFromCa, poll: opts.configPoll, timeout: opts.configFromTimeout, env: process.env });
    } catch (err) {
      if (!(err instanceof SourceError)) throw err;
      process.stderr.write(`error: ${err.message}\n`);
      return 2;
    }
    // Before the App: the first generation already runs the primary's configuration.
    follow = { source, initial: await initialPull(source, configPath, createCatalog(), process.env) };
  }
  tuneHeapGrowth();
  const originalCwd = process.cwd();
  // The first start after an upgrade is a trial, decided by the upgrade actor (machines/upgrade.machine.ts):
  // it confirms the new release once serving, or switches back and restarts into the old one.
  const installDir = detectInstallDir(undefined, opts.dir);
  const upgradeStart = readUpgradeStart(VERSION, installDir);
  if (upgradeStart.rolledBack !== null) {
    process.stderr.write(`error: ${upgradeStart.rolledBack}\n`);
    return handOver(originalCwd) || 1;
  }
  process.chdir(opts.dir);
  // Signals are handled from the start: one arriving during startup stops the service once it is up.
  let app: App | null = null;
  let signals = 0;
  const onSignal = (signal: string): void => {
    if (++signals > 1) {
      process.stderr.write(`${signal} again: exiting now\n`);
      process.exit(130);
    }
    void app?.stop();
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  // SIGHUP: the reload POST /api/reload asks for (same event, same guards); before serving, nothing to reload.
  process.on("SIGHUP", () => {
    if (!app) return;
    try {
      app.requestReload();
      app.log.info({ target: "config" }, "SIGHUP: reload requested");
    } catch (err) {
      app.log.warn({ target: "config", err: describe(err) }, "SIGHUP: reload refused");
    }
  });
  const trial = upgradeStart.trial && installDir !== null ? { trial: upgradeStart.trial, installDir, originalCwd } : null;
  try {
    app = await App.start({ configPath, baseDir: opts.dir, logLevel: opts.level, upgradeRestored: upgradeStart.restored, upgradeTrial: trial, follow });
  } catch (err) {
    report(err);
    if (follow?.initial.error) process.stderr.write(`error: ${follow.initial.error}\n`);
    // A start that failed once the upgrade actor ran has been switched back by it; this one failed before
    // the actor existed (the configuration could not be read), or its switch back failed: (try) now.
    if (trial) {
      const reason = `release ${trial.trial.to_version} failed to start: ${describe(err).split("\n")[0]}`;
      rollBackTrial(trial.installDir, trial.trial, reason, Date.now());
      restartIntoPrevious(`${reason}; switched back to ${trial.trial.from_version}`, originalCwd);
    }
    return 1;
  }
  if (signals > 0) void app.stop();
  else void notifyReady(`serving (sluice ${VERSION})`, app.log);
  const outcome = await app.done;
  if (outcome.error) process.stderr.write(`error: ${outcome.error}\n`);
  if (outcome.restart) return handOver(originalCwd, app.log);
  return outcome.error ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    report(err);
    process.exit(1);
  },
);
