// The Debian package end to end (issue 28): `npm run package:deb`'s builder makes the .deb once
// (beforeAll; lintian starts on it at once and is read last); its contents and control fields are checked,
// lintian has nothing left to say, then as root it is installed with dpkg -i, /usr/bin/sluice is
// started the way sluice.service starts it (the sluice user, only CAP_NET_BIND_SERVICE, through
// setpriv) on port 53 of a loopback address of the test's own, tells $NOTIFY_SOCKET it is ready,
// dig gets answers, SIGHUP reloads, the self-upgrade says upgrade_managed_by_package, SIGTERM
// stops it, the unit passes `systemd-analyze verify`, and `dpkg --purge` leaves no file behind.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createSocket } from "node:dgram";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildDeb, type BuiltDeb } from "../../src/release/deb.js";
import { VERSION } from "../../src/version.js";
import { startCli, type RunningCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

const ROOT = join(import.meta.dirname, "..", "..");
const run = promisify(execFile);
const work = tempDir("sluice-deb-");
let deb: BuiltDeb;
let lintian: Promise<{ code: number; stdout: string; stderr: string }>;
let before: Set<string>;
let sluice: RunningCli | null = null;
let receiver: ChildProcess | null = null;
let notifyDir = "";

/** Where the package puts files, and where its scripts could leave some (dpkg's own records aside). */
const WATCHED = ["/etc", "/usr/bin", "/usr/sbin", "/usr/lib/sluice", "/usr/share/doc", "/usr/share/man", "/usr/share/lintian", "/lib/systemd/system", "/usr/lib/systemd/system", "/var/lib"];
/** What Debian keeps by design: dpkg's database (the package's status, its file lists are removed) and apt's. */
const KEPT = ["/var/lib/dpkg", "/var/lib/apt"];

function fileList(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string): void => {
    if (KEPT.some((k) => dir === k)) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      out.add(path);
      if (e.isDirectory()) walk(path);
    }
  };
  for (const dir of WATCHED) if (existsSync(dir)) walk(dir);
  return out;
}

/** dpkg, waiting out another dpkg or apt on this machine holding the lock (a few seconds at most). */
async function dpkg(args: string[]): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await run("dpkg", args, { env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
      return r.stdout + r.stderr;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      if (!/lock/i.test(e.stderr ?? "") || attempt >= 60) throw new Error(`dpkg ${args.join(" ")}: ${e.stderr ?? e.message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function installed(): Promise<boolean> {
  try {
    return /^install ok installed$/m.test((await run("dpkg-query", ["-W", "-f=${Status}\n", "sluice"])).stdout);
  } catch {
    return false;
  }
}

/** True when nothing holds port 53 (UDP and TCP) on `address`. */
async function port53Free(address: string): Promise<boolean> {
  const udp = await new Promise<boolean>((resolve) => {
    const s = createSocket("udp4");
    s.once("error", () => resolve(false));
    s.bind(53, address, () => s.close(() => resolve(true)));
  });
  if (!udp) return false;
  return new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(53, address, () => s.close(() => resolve(true)));
  });
}

/**
 * systemd's side of Type=notify: a unix datagram socket ($NOTIFY_SOCKET) that prints each message
 * and closes the barrier descriptor systemd-notify waits on, as the service manager does.
 */
const NOTIFY_RECEIVER = `
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
print("listening", flush=True)
while True:
    msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            for fd in fds:
                os.close(fd)
    print(msg.decode().replace("\\n", " "), flush=True)
`;

async function dig(address: string, ...args: string[]): Promise<string> {
  return (await run(requireTool("dig"), [`@${address}`, "+time=2", "+tries=1", ...args])).stdout.trim();
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("the package test installs the .deb with dpkg -i: run it as root (CI and the dev container do)");
  const lintianPath = requireTool("lintian");
  requireTool("dpkg-shlibdeps");
  requireTool("systemd-analyze");
  requireTool("setpriv");
  // A run that died half-way left the package installed.
  if (await installed()) await dpkg(["--purge", "sluice"]);
  before = fileList();
  // gzip -1: a format lintian reads, built in a second where xz takes tens (the same contents).
  deb = await buildDeb({ root: ROOT, outDir: work, compression: "gzip", compressionLevel: 1 });
  lintian = new Promise((resolve) => {
    // binaries/spelling reads every string of the bundled node binary (a third of lintian's checking time)
    // for a tag of visibility "info" only (spelling-error-in-binary); the test reads errors and warnings.
    execFile(lintianPath, ["--no-cfg", "--dont-check-part", "binaries/spelling", deb.file], { maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}, 180_000);

afterAll(async () => {
  if (sluice && sluice.child.exitCode === null) sluice.child.kill("SIGKILL");
  receiver?.kill();
  if (notifyDir) rmSync(notifyDir, { recursive: true, force: true });
  if (await installed()) await dpkg(["--purge", "sluice"]);
  await lintian.catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("the Debian package", () => {
  test("its name, control fields and maintainer scripts", async () => {
    expect(deb.file).toBe(join(work, `sluice_${VERSION}-1_${deb.arch}.deb`));
    const field = async (name: string): Promise<string> => (await run("dpkg-deb", ["-f", deb.file, name])).stdout.trim();
    expect(await field("Package")).toBe("sluice");
    expect(await field("Version")).toBe(`${VERSION}-1`);
    expect(await field("Architecture")).toBe((await run("dpkg", ["--print-architecture"])).stdout.trim());
    const depends = await field("Depends");
    expect(depends).toMatch(/^adduser, libc6 \(>= [0-9.]+\)/);
    // The default bundles Node: no dependency on the distribution's (too old on Debian 12).
    expect(depends).not.toContain("nodejs");
    expect(Number(await field("Installed-Size"))).toBeGreaterThan(50_000);
    expect(await field("Section")).toBe("net");
    const info = (await run("dpkg-deb", ["-I", deb.file])).stdout;
    for (const f of ["postinst", "prerm", "postrm", "conffiles", "md5sums"]) expect(info, f).toContain(` ${f}`);
    expect((await run("dpkg-deb", ["-I", deb.file, "conffiles"])).stdout).toBe("/etc/sluice/sluice.yaml\n");
  });

  test("its files: the program under /usr/lib/sluice with Node, the launcher, the conffile, the unit, the man page and docs", async () => {
    const listing = (await run("dpkg-deb", ["-c", deb.file], { maxBuffer: 64 * 1024 * 1024 })).stdout.split("\n").filter((l) => l !== "");
    const entries = new Map(listing.map((l) => [l.split(/\s+/).slice(5).join(" ").replace(/^\./, ""), l]));
    const mode = (path: string): string => {
      const line = entries.get(path);
      if (!line) throw new Error(`${path} is not in the package`);
      return line.split(/\s+/).slice(0, 2).join(" ");
    };
    expect(mode("/usr/bin/sluice")).toBe("-rwxr-xr-x root/root");
    expect(mode("/usr/lib/sluice/node")).toBe("-rwxr-xr-x root/root");
    for (const f of ["/etc/sluice/sluice.yaml", "/lib/systemd/system/sluice.service", "/usr/share/man/man8/sluice.8.gz", "/usr/share/doc/sluice/copyright", "/usr/share/doc/sluice/changelog.Debian.gz", "/usr/lib/sluice/sluice-package.json", "/usr/lib/sluice/package.json", "/usr/lib/sluice/dist/bundle/cli.js"]) {
      expect(mode(f), f).toMatch(/^-rw[-x]r-[-x]r-[-x] root\/root$/);
    }
    expect([...entries.keys()].some((p) => /^\/usr\/lib\/sluice\/node_modules\/better-sqlite3\/build\/Release\/better_sqlite3\.node$/.test(p))).toBe(true);
    expect([...entries.keys()].some((p) => p.startsWith("/usr/lib/sluice/dist/webui/"))).toBe(true);
    // Development files of the bundled packages are left out.
    expect([...entries.keys()].filter((p) => /\/node_modules\/[^/]+\/(test|\.github)\//.test(p))).toEqual([]);
  });

  test("installed with dpkg -i: the sluice user, its data directory, the man page from the CLI's help; the unit passes systemd-analyze verify", async () => {
    await dpkg(["-i", deb.file]);
    expect(await installed()).toBe(true);
    const passwd = (await run("getent", ["passwd", "sluice"])).stdout.split(":");
    expect(Number(passwd[2])).toBeLessThan(1000);
    expect(passwd[5]).toBe("/var/lib/sluice");
    const data = statSync("/var/lib/sluice");
    expect([data.uid, data.mode & 0o777]).toEqual([Number(passwd[2]), 0o750]);
    expect((await run("/usr/bin/sluice", ["--version"])).stdout).toBe(`sluice ${VERSION}\n`);
    const man = gunzipSync(readFileSync("/usr/share/man/man8/sluice.8.gz")).toString();
    expect(man).toMatch(/^\.TH SLUICE 8 /);
    expect(man).toContain("SIGHUP reloads the configuration file");
    expect(man).toContain(".SH UPGRADE");
    const verify = await run(requireTool("systemd-analyze"), ["verify", "/lib/systemd/system/sluice.service"]);
    expect(verify.stderr).toBe("");
  }, 60_000);

  test("started as the unit starts it (the sluice user, CAP_NET_BIND_SERVICE only) on port 53 of a loopback address: READY=1 on $NOTIFY_SOCKET, answers, SIGHUP reload, no self-upgrade, stops on SIGTERM", async () => {
    let address = "127.0.5.3";
    for (let i = 4; !(await port53Free(address)); i++) address = `127.0.5.${i}`;
    const conf = readFileSync("/etc/sluice/sluice.yaml", "utf8");
    // The installed configuration, changed only in its addresses: the test's loopback address, an API on port 0.
    const changed = conf.replaceAll("listen: 127.0.0.1:53", `listen: ${address}:53`).replace("http: 127.0.0.1:9080", "http: 127.0.0.1:0");
    expect(changed.split("\n").filter((l, i) => l !== conf.split("\n")[i])).toHaveLength(3);
    writeFileSync("/etc/sluice/sluice.yaml", changed);
    // The notify socket where the sluice user reaches it (the test's temporary directory is root's alone).
    notifyDir = mkdtempSync("/run/sluice-test-notify-");
    chmodSync(notifyDir, 0o755);
    const notifySocket = join(notifyDir, "notify");
    receiver = spawn(requireTool("python3"), ["-c", NOTIFY_RECEIVER, notifySocket]);
    let notified = "";
    receiver.stdout?.on("data", (d: Buffer) => (notified += d.toString()));
    const until = async (what: string, done: () => boolean): Promise<void> => {
      const end = Date.now() + 15_000;
      while (!done()) {
        if (Date.now() > end) throw new Error(`${what} not seen; notify socket got: ${notified}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await until("the notify receiver", () => notified.includes("listening"));
    sluice = startCli(["-c", "/etc/sluice/sluice.yaml", "-d", "/var/lib/sluice"], {
      launcher: "/usr/bin/sluice",
      cwd: "/var/lib/sluice",
      env: { NOTIFY_SOCKET: notifySocket },
      wrapper: ["setpriv", "--reuid", "sluice", "--regid", "sluice", "--init-groups", "--inh-caps", "+net_bind_service", "--ambient-caps", "+net_bind_service", "--bounding-set", "-all,+net_bind_service", "--no-new-privs"],
    });
    await sluice.waitForLog((l) => l.msg === "sluice started", 30_000);
    const api = `http://127.0.0.1:${String((await sluice.waitForLog((l) => l.msg === "management API listening")).port)}`;
    // Readiness (Type=notify): READY=1 once it serves, through systemd-notify.
    await until("READY=1", () => notified.includes(`READY=1 STATUS=serving (sluice ${VERSION})`));
    receiver.kill();

    const status = readFileSync(`/proc/${sluice.child.pid}/status`, "utf8");
    const caps = (name: string): string => new RegExp(`^${name}:\\s*([0-9a-f]+)$`, "m").exec(status)?.[1] ?? "";
    // 0x400: CAP_NET_BIND_SERVICE (bit 10), nothing else, in every set.
    for (const set of ["CapEff", "CapPrm", "CapBnd", "CapAmb"]) expect(BigInt(`0x${caps(set)}`), set).toBe(0x400n);
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe((await run("id", ["-u", "sluice"])).stdout.trim());

    expect(await dig(address, "localhost", "+short")).toBe("127.0.0.1");
    expect(await dig(address, "localhost", "AAAA", "+short", "+tcp")).toBe("::1");

    const reloads = async (): Promise<{ last_success_ms: number | null; status: string }> => (await (await fetch(`${api}/api/reload/status`)).json()) as { last_success_ms: number | null; status: string };
    const first = (await reloads()).last_success_ms;
    sluice.child.kill("SIGHUP");
    await sluice.waitForLog((l) => l.msg === "SIGHUP: reload requested");
    const deadline = Date.now() + 15_000;
    while ((await reloads()).last_success_ms === first || (await reloads()).status !== "ok") {
      if (Date.now() > deadline) throw new Error(`no reload after SIGHUP: ${JSON.stringify(await reloads())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await dig(address, "localhost", "+short")).toBe("127.0.0.1");

    const apply = await fetch(`${api}/api/upgrade/apply`, { method: "POST" });
    expect(apply.status).toBe(409);
    expect(await apply.json()).toMatchObject({ ok: false, code: "upgrade_managed_by_package" });
    expect(await (await fetch(`${api}/api/upgrade/status`)).json()).toMatchObject({ managed_by_package: true, installed_release: false });

    sluice.child.kill("SIGTERM");
    expect(await sluice.exited).toEqual({ code: 0, signal: null });
    // What it wrote is the sluice user's, in its data directory.
    expect(statSync("/var/lib/sluice/data/queries.db").uid).toBe(Number((await run("id", ["-u", "sluice"])).stdout));
  }, 90_000);

  test("dpkg --purge leaves no file behind and removes the sluice user", async () => {
    const out = await dpkg(["--purge", "sluice"]);
    expect(out).toContain("Purging configuration files for sluice");
    const left = [...fileList()].filter((f) => !before.has(f));
    expect(left).toEqual([]);
    expect(existsSync("/var/lib/dpkg/info/sluice.list")).toBe(false);
    await expect(run("getent", ["passwd", "sluice"])).rejects.toThrow();
    await expect(run("getent", ["group", "sluice"])).rejects.toThrow();
  }, 60_000);

  test("lintian has no error or warning left (the overrides are explained in docs/operations.md)", async () => {
    const r = await lintian;
    process.stdout.write(`lintian ${deb.file}:\n${r.stdout || "(nothing)\n"}`);
    expect(r.stdout.split("\n").filter((l) => /^[EW]: /.test(l))).toEqual([]);
    expect(r.code).toBe(0);
  }, 120_000);
});
