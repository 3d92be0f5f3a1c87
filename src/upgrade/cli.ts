// sluice upgrade check|apply|rollback: the same engine as the API, for an operator at a shell.
// apply installs and switches `current` but does not restart the service; rollback swaps
// `current` and `previous`. The release host's token comes from SLUICE_RELEASE_HOST_TOKEN, never
// from the command line (other users see arguments in ps). An operator at a shell may name another
// repository or proxy (--repository, --socks5); the API never can. Signatures are required alike.

import { resolve } from "node:path";
import { loadConfigFile } from "../config/load.js";
import { createLogger } from "../observability/logger.js";
import { applyUpgrade, checkUpgrade, rollbackInstall, NotInstalledError } from "./engine.js";
import { resolveOptions, type ShellOverrides, type UpgradeRequest } from "./options.js";

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

export class UpgradeUsageError extends Error {}

interface Parsed {
  action: "check" | "apply" | "rollback";
  config: string;
  dir: string;
  request: UpgradeRequest;
  shell: ShellOverrides;
}

function parse(argv: string[]): Parsed {
  const [action, ...rest] = argv;
  if (action !== "check" && action !== "apply" && action !== "rollback") throw new UpgradeUsageError(`upgrade needs check, apply or rollback${action ? `, not '${action}'` : ""}`);
  const out: Parsed = { action, config: "sluice.yaml", dir: process.cwd(), request: {}, shell: {} };
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i];
    const need = (): string => {
      const value = rest[i + 1];
      if (value === undefined || value.startsWith("-")) throw new UpgradeUsageError(`${flag} needs a value`);
      i++;
      return value;
    };
    if (flag === "-c" || flag === "--config") out.config = need();
    else if (flag === "-d" || flag === "--working-dir") out.dir = resolve(need());
    else if (flag === "--repository" && action !== "rollback") out.shell.repository = need();
    else if (flag === "--target" && action !== "rollback") out.request.target = need();
    else if (flag === "--socks5" && action !== "rollback") out.shell.socks5 = need();
    else if (flag === "--allow-prerelease" && action !== "rollback") out.request.allow_prerelease = true;
    else throw new UpgradeUsageError(`unknown option '${flag}'`);
  }
  return out;
}

/** Runs `sluice upgrade ...`; returns the exit status. */
export async function runUpgradeCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const p = parse(argv);
  const configPath = resolve(p.dir, p.config);
  const config = loadConfigFile(configPath, { env });
  const token = env.SLUICE_RELEASE_HOST_TOKEN;
  const options = resolveOptions(config.upgrade, { ...p.request, release_host_token: token ? token : null }, { baseDir: p.dir, env }, p.shell);
  const print = (line: string): boolean => process.stdout.write(line + "\n");
  if (p.action === "check") {
    const r = await checkUpgrade(options);
    print(`current ${r.current_version}, latest ${r.latest_version}: ${r.update_available ? "update available" : "up to date"}`);
    print(`asset: ${r.asset_name ?? "none for this platform"}`);
    if (r.release_url) print(`release: ${r.release_url}`);
    return 0;
  }
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
