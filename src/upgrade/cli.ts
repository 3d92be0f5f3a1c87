// sluice upgrade check|apply|rollback: the same engine as the API, for an operator at a shell.
// apply installs and switches `current` but does not restart the service; rollback swaps
// `current` and `previous`. The release host's token comes from SLUICE_RELEASE_HOST_TOKEN, never
// from the command line (other users see arguments in ps). An operator at a shell may name another
// repository or proxy (--repository, --socks5); the API never can. Signatures are required alike.

import { resolve } from "node:path";
import { loadConfigFile } from "../config/load.js";
import { createLogger } from "../observability/logger.js";
import { applyUpgrade, checkUpgrade, rollbackInstall, NotInstalledError } from "./engine.js";
import { parseOptions, UsageError, type OptionSpec } from "../cli-args.js";
import { resolveOptions, type ShellOverrides, type UpgradeRequest } from "./options.js";
import { packageMarker } from "./layout.js";

export const UPGRADE_HELP = `Usage:
  sluice upgrade check    [-c FILE] [-d DIR] [options]   compare the newest release with this one
  sluice upgrade apply    [-c FILE] [-d DIR] [options]   install it and switch current (restart the service afterwards)
  sluice upgrade rollback [-c FILE] [-d DIR]             switch current back to the previous release

Options (override the configuration's upgrade section, which must exist):
  --repository OWNER/NAME   release repository (its releases must still be signed by upgrade.public_key)
  --target TAG              a release tag instead of the newest release
  --allow-prerelease        consider prereleases
  --socks5 URL              socks5://[user:pass@]host:port proxy
The release host's token, if it needs one, is read from SLUICE_RELEASE_HOST_TOKEN.
`;

interface Parsed {
  action: "check" | "apply" | "rollback";
  config: string;
  dir: string;
  request: UpgradeRequest;
  shell: ShellOverrides;
}

const LOCATION: OptionSpec = { config: { type: "string", short: "c" }, "working-dir": { type: "string", short: "d" } };
/** rollback takes only -c and -d; check and apply may also override the release source. */
const ACTION_OPTIONS: Record<Parsed["action"], OptionSpec> = {
  rollback: LOCATION,
  check: { ...LOCATION, repository: { type: "string" }, target: { type: "string" }, socks5: { type: "string" }, "allow-prerelease": { type: "boolean" } },
  apply: { ...LOCATION, repository: { type: "string" }, target: { type: "string" }, socks5: { type: "string" }, "allow-prerelease": { type: "boolean" } },
};

function parse(argv: string[]): Parsed {
  const [action, ...rest] = argv;
  if (action !== "check" && action !== "apply" && action !== "rollback") throw new UsageError(`upgrade needs check, apply or rollback${action ? `, not '${action}'` : ""}`);
  const v = parseOptions(rest, ACTION_OPTIONS[action]);
  const str = (name: string): string | undefined => v[name] as string | undefined;
  const request: UpgradeRequest = {};
  const shell: ShellOverrides = {};
  if (str("target") !== undefined) request.target = str("target");
  if (v["allow-prerelease"] === true) request.allow_prerelease = true;
  if (str("repository") !== undefined) shell.repository = str("repository");
  if (str("socks5") !== undefined) shell.socks5 = str("socks5");
  return { action, config: str("config") ?? "sluice.yaml", dir: str("working-dir") === undefined ? process.cwd() : resolve(str("working-dir") as string), request, shell };
}

/** Runs `sluice upgrade ...`; returns the exit status. */
export async function runUpgradeCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const p = parse(argv);
  const configPath = resolve(p.dir, p.config);
  const config = loadConfigFile(configPath, { env });
  const token = env.SLUICE_RELEASE_HOST_TOKEN;
  const options = resolveOptions(config.upgrade, { ...p.request, release_host_token: token ? token : null }, { baseDir: p.dir, env, outbound: config.outbound }, p.shell);
  const print = (line: string): boolean => process.stdout.write(line + "\n");
  if (p.action === "check") {
    const r = await checkUpgrade(options);
    print(`current ${r.current_version}, latest ${r.latest_version}: ${r.update_available ? "update available" : "up to date"}`);
    print(`asset: ${r.asset_name ?? "none for this platform"}`);
    if (r.release_url) print(`release: ${r.release_url}`);
    return 0;
  }
  const marker = packageMarker();
  if (marker) throw new Error(`upgrade_managed_by_package: this installation belongs to the ${marker.manager} package ${marker.package} ${marker.version}; upgrade or downgrade it with the package manager (apt), not with sluice upgrade ${p.action}`);
  if (options.installDir === null) throw new NotInstalledError();
  if (p.action === "rollback") {
    const r = await rollbackInstall(options.installDir);
    print(`current: ${r.to} (was ${r.from}); restart the service to run it (systemctl restart sluice, or POST /api/restart)`);
    return 0;
  }
  const log = createLogger({ level: "info", stdout: process.stderr });
  const r = await applyUpgrade(options, { log, configPath, baseDir: p.dir });
  if (r.outcome === "skipped") print(`already the newest release (${r.version})`);
  else print(`installed ${r.version} (was ${r.from}); restart the service to run it (systemctl restart sluice, or POST /api/restart)`);
  return 0;
}
