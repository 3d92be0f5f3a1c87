// @ts-check
// What the harness needs before it measures anything: the tools (installed with apt-get when missing and
// possible), Sluice's build, the generated data and query files, and a description of the machine.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import { join } from "node:path";
import { clientsConfigFile } from "./clients.mjs";
import { adguardData, domainSetData, localHostsFile, localNames, localZoneFile, prefetchQueries, queryFile } from "./data.mjs";

const TOOLS = [
  { name: "dnsperf", paths: ["/usr/bin/dnsperf", "/usr/local/bin/dnsperf"] },
  { name: "dnsmasq", paths: ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/usr/local/sbin/dnsmasq"] },
  { name: "unbound", paths: ["/usr/sbin/unbound", "/usr/bin/unbound", "/usr/local/sbin/unbound"] },
  // The doh scenario's load generator (see lib/h2load.mjs for why not dnsperf -m doh).
  { name: "h2load", paths: ["/usr/bin/h2load", "/usr/local/bin/h2load"] },
];
const APT_PACKAGES = ["dnsperf", "dnsmasq-base", "unbound", "nghttp2-client"];

/** @param {string} name @param {string[]} paths */
function locate(name, paths) {
  for (const dir of (process.env.PATH ?? "").split(":")) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return paths.find((p) => existsSync(p)) ?? null;
}

/** @returns {Record<string, string>} tool name → absolute path */
function findTools() {
  /** @type {Record<string, string>} */
  const found = {};
  for (const t of TOOLS) {
    const p = locate(t.name, t.paths);
    if (p) found[t.name] = p;
  }
  return found;
}

/**
 * Finds dnsperf, dnsmasq and unbound; installs them with apt-get when missing and running as root.
 * Exits 1 with instructions otherwise. Also requires Sluice's build (dist/bundle/cli.js).
 * @param {string} root repository root
 * @returns {{ tools: Record<string, string>, cli: string, taskset: string | null }}
 */
export function checkPrerequisites(root) {
  let tools = findTools();
  const missing = () => TOOLS.filter((t) => !tools[t.name]).map((t) => t.name);
  if (missing().length > 0) {
    const aptGet = locate("apt-get", ["/usr/bin/apt-get"]);
    if (aptGet && process.getuid?.() === 0) {
      console.log(`installing ${APT_PACKAGES.join(" ")} (missing: ${missing().join(", ")}) ...`);
      const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
      try {
        execFileSync(aptGet, ["install", "-y", "-qq", ...APT_PACKAGES], { stdio: ["ignore", "ignore", "inherit"], env });
      } catch {
        execFileSync(aptGet, ["update", "-qq"], { stdio: ["ignore", "ignore", "inherit"], env });
        execFileSync(aptGet, ["install", "-y", "-qq", ...APT_PACKAGES], { stdio: ["ignore", "ignore", "inherit"], env });
      }
      tools = findTools();
    }
    if (missing().length > 0) {
      console.error(`missing: ${missing().join(", ")}. Install them, e.g.: sudo apt-get install ${APT_PACKAGES.join(" ")}`);
      process.exit(1);
    }
  }
  const cli = join(root, "dist/bundle/cli.js");
  if (!existsSync(cli)) {
    console.error(`${cli} not found: build Sluice first (npm run build), or run \`npm run bench\`, which builds.`);
    process.exit(1);
  }
  return { tools, cli, taskset: locate("taskset", ["/usr/bin/taskset"]) };
}

/** @param {string} file @param {string[]} args */
function versionLine(file, args) {
  try {
    const out = execFileSync(file, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return out.split("\n").find((l) => /version/i.test(l))?.trim() ?? out.split("\n")[0].trim();
  } catch (err) {
    const e = /** @type {{ stdout?: string }} */ (err);
    return (e.stdout ?? "").split("\n").find((l) => /version/i.test(l))?.trim() ?? "unknown";
  }
}

/** The machine the numbers come from. @param {Record<string, string>} tools */
export function machineInfo(tools) {
  let cpuModel = os.cpus()[0]?.model ?? "unknown";
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    if (m) cpuModel = m[1].trim();
  } catch {
    /* not Linux */
  }
  return {
    cpuModel,
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    kernel: `${os.type()} ${os.release()}`,
    dnsperf: versionLine(tools.dnsperf, ["-h"]).replace(/^Version\s*/i, ""),
    unbound: versionLine(tools.unbound, ["-V"]).replace(/^Version\s*/i, ""),
    dnsmasq: versionLine(tools.dnsmasq, ["--version"]).replace(/\s+Copyright.*/, ""),
    h2load: versionLine(tools.h2load, ["--version"]),
    loadAverageAtStart: os.loadavg().map((l) => Number(l.toFixed(2))),
  };
}

/**
 * Writes a file only when its content differs (the committed query files stay untouched on a normal run).
 * @param {string} path @param {string} text
 */
async function writeIfChanged(path, text) {
  const old = await readFile(path, "utf8").catch(() => null);
  if (old !== text) await writeFile(path, text);
}

/**
 * Generates the data every scenario needs: query files under bench/queries, and the hosts file, zone file,
 * 100 000-rule file, 150 000-rule AdGuard list (with an empty one) and the clients scenario's provider in the temp dir.
 * @param {string} benchDir @param {string} tmp
 */
export async function prepareData(benchDir, tmp) {
  const ds = domainSetData();
  const ag = adguardData();
  const queries = {
    local: join(benchDir, "queries/names-1k.txt"),
    domainSet: join(benchDir, "queries/domain-set.txt"),
    adguard: join(benchDir, "queries/adguard.txt"),
    prefetch: join(benchDir, "queries/prefetch.txt"),
  };
  await writeIfChanged(queries.local, queryFile(localNames()));
  await writeIfChanged(queries.domainSet, queryFile(ds.queries));
  await writeIfChanged(queries.adguard, queryFile(ag.queries));
  await writeIfChanged(queries.prefetch, queryFile(prefetchQueries()));
  const adguardRules = join(tmp, "adguard-150k.txt");
  const adguardEmpty = join(tmp, "adguard-empty.txt");
  await writeFile(adguardRules, ag.lines.join("\n") + "\n");
  await writeFile(adguardEmpty, "! an empty list: the baseline for the adguard provider's memory\n");
  const rules = join(tmp, "rules-100k.txt");
  const clients = join(tmp, "clients-1k.yaml");
  await writeFile(clients, clientsConfigFile());
  await writeFile(join(tmp, "local-hosts.txt"), localHostsFile());
  await writeFile(join(tmp, "local.zone"), localZoneFile());
  await writeFile(rules, ["# generated by bench/run.mjs: 100 000 rules (full:, domain:, keyword:)", ...ds.rules].join("\n") + "\n");
  return { queries, rules, clients, adguardRules, adguardEmpty, cert: makeCertificate(tmp), refData: { blockedZones: ds.blockedZones, keywordHits: ds.keywordHits } };
}

/**
 * A self-signed P-256 certificate for 127.0.0.1, shared by Sluice and unbound in the tls and doh scenarios
 * (dnsperf does not verify it). @param {string} tmp
 */
function makeCertificate(tmp) {
  const cert = join(tmp, "bench.crt");
  const key = join(tmp, "bench.key");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
    "-keyout", key, "-out", cert, "-subj", "/CN=bench", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], { stdio: ["ignore", "ignore", "pipe"] });
  return { cert, key };
}

/**
 * A reading of the machine's CPU counters and of the harness's own (children included, once reaped), so that
 * the work of other processes and the hypervisor's steal during a run can be reported with its results.
 */
export function cpuReading() {
  const stat = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal
  const [user, nice, system, idle, iowait, irq, softirq, steal] = stat;
  const self = readFileSync("/proc/self/stat", "utf8");
  const f = self.slice(self.lastIndexOf(")") + 2).split(" ").map(Number);
  return {
    busy: user + nice + system,
    total: user + nice + system + idle + iowait + irq + softirq + steal,
    steal,
    mine: f[11] + f[12] + f[13] + f[14],
  };
}

/**
 * Shares of the machine's CPU time between two readings: used by processes other than the harness and what it
 * started (approximate: kernel work on their behalf may land on either side), and stolen by the hypervisor.
 * @param {ReturnType<typeof cpuReading>} a @param {ReturnType<typeof cpuReading>} b
 */
export function cpuShares(a, b) {
  const total = b.total - a.total;
  if (total <= 0) return { otherProcesses: 0, steal: 0 };
  return {
    otherProcesses: Number((Math.max(0, b.busy - a.busy - (b.mine - a.mine)) / total).toFixed(3)),
    steal: Number(((b.steal - a.steal) / total).toFixed(3)),
  };
}
