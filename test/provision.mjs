// Runs before the test suite (`npm test`): checks that every program listed in test/tools.json is
// installed and, where some are missing, installs their Debian packages with apt-get (as root, or
// through `sudo -n`), one line per package with the time it took. Where it cannot install (another
// system, no root and no password-less sudo, or SLUICE_TEST_INSTALL=0), it stops before any test
// runs with one message naming the missing packages and the command that installs them.

import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, readFileSync, readdirSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";

const { tools } = JSON.parse(readFileSync(new URL("./tools.json", import.meta.url), "utf8"));

/** True when `command` is an executable on PATH. */
function onPath(command) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

/** True when a file matches `pattern`, whose one `*` stands for a directory name. */
function pathExists(pattern) {
  const star = pattern.indexOf("*");
  if (star < 0) return existsSync(pattern);
  const parent = dirname(pattern.slice(0, star + 1));
  const rest = pattern.slice(pattern.indexOf("/", star));
  if (!existsSync(parent)) return false;
  return readdirSync(parent).some((entry) => existsSync(join(parent, entry, rest)));
}

const present = (tool) => (tool.path ? pathExists(tool.path) : onPath(tool.command));
const missingTools = () => tools.filter((t) => !present(t));
const packagesOf = (list) => [...new Set(list.map((t) => t.package))];

const missing = missingTools();
if (missing.length === 0) process.exit(0);

const packages = packagesOf(missing);
const installCommand = `sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages.join(" ")}`;

function stop(reason) {
  const list = missing.map((t) => `${t.command} (${t.package})`).join(", ");
  console.error(
    `\nnpm test: the test suite drives programs that are missing here: ${list}.\n` +
      `${reason}\nInstall them with:\n\n  ${installCommand}\n\nthen run npm test again. (test/tools.json says what each one is for.)\n`,
  );
  process.exit(1);
}

if (process.env.SLUICE_TEST_INSTALL === "0") stop("SLUICE_TEST_INSTALL=0: not installing them.");
if (process.platform !== "linux" || !existsSync("/etc/debian_version") || !onPath("apt-get")) stop("This is not a Debian or Ubuntu system with apt-get, so npm test cannot install them itself.");

const root = typeof process.getuid === "function" && process.getuid() === 0;
const sudo = !root && onPath("sudo") && spawnSync("sudo", ["-n", "true"], { stdio: "ignore" }).status === 0;
if (!root && !sudo) stop("npm test installs them itself only as root or with password-less sudo (sudo -n).");

const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
/** Runs apt-get (through sudo when not root); its output is shown only when it fails. */
function aptGet(args) {
  const [cmd, argv] = root ? ["apt-get", args] : ["sudo", ["-n", "apt-get", ...args]];
  const started = process.hrtime.bigint();
  const run = spawnSync(cmd, argv, { env, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (run.status !== 0) {
    process.stderr.write(`${run.stdout ?? ""}${run.stderr ?? ""}`.split("\n").slice(-20).join("\n"));
    stop(`apt-get ${args.filter((a) => !a.startsWith("-")).join(" ")} failed (exit ${String(run.status)}).`);
  }
  return seconds.toFixed(1);
}

console.log(`npm test: installing ${packages.length} Debian package(s) the tests drive (SLUICE_TEST_INSTALL=0 turns this off):`);
console.log(`  apt-get update: ${aptGet(["update", "-qq"])} s`);
for (const pkg of packages) {
  const commands = missing.filter((t) => t.package === pkg).map((t) => t.command).join(", ");
  console.log(`  ${pkg} (${commands}): ${aptGet(["install", "-y", "-qq", "--no-install-recommends", pkg])} s`);
}
const still = missingTools();
if (still.length > 0) stop(`After installing, still missing: ${still.map((t) => t.command).join(", ")}.`);
