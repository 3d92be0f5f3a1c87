// The Debian package, sluice_<version>-<revision>_<arch>.deb, built with dpkg-deb from the same
// staged program as the release tarball (src/release/build.ts):
//   /usr/lib/sluice            dist/, package.json, production node_modules (native addons as built
//                              here), config/, sluice-package.json (the marker that switches the
//                              self-upgrade off) and, by default, the Node binary running this build
//   /usr/bin/sluice            the launcher (packaging/deb/launcher)
//   /etc/sluice/sluice.yaml    the configuration, a conffile (packaging/deb/sluice.yaml)
//   /lib/systemd/system/sluice.service, sluice(8), /usr/share/doc/sluice/{copyright,changelog.Debian.gz,README.md}
// and the maintainer scripts of packaging/deb. docs/operations.md "Running as a service" explains them.

import { execFile, execFileSync } from "node:child_process";
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { PACKAGE_MARKER, type PackageMarker } from "../upgrade/layout.js";
import { BUILT_CLI } from "../upgrade/release.js";
import { stageProgram } from "./build.js";
import { changelog, copyright, manPage } from "./deb-docs.js";

export type DebCompression = "xz" | "gzip" | "zstd" | "none";

export interface DebOptions {
  /** The checkout: package.json, package-lock.json, node_modules, dist/ (built), packaging/deb. */
  root: string;
  outDir: string;
  /** The upstream version (default: package.json's). */
  version?: string;
  /** The Debian revision after the dash (default 1). */
  revision?: string;
  /** Depend on the distribution's `nodejs (>= 20.19)` instead of bundling the Node binary running this build. */
  systemNode?: boolean;
  /** dpkg-deb's compression (default xz, as Debian's archive). */
  compression?: DebCompression;
  /** dpkg-deb's compression level (its default: 9 for gzip, 6 for xz); the tests build with 1. */
  compressionLevel?: number;
  /** "Name <address>" (default: DEBFULLNAME/DEBEMAIL, else the project's). */
  maintainer?: string;
  /** The date of the changelog entry and man page (default: SOURCE_DATE_EPOCH, else now). */
  date?: Date;
}

export interface BuiltDeb {
  file: string;
  version: string;
  arch: string;
  /** The control file as written. */
  control: string;
}

/** The oldest Node the program supports (package.json engines). */
export const MIN_NODE = "20.19";
/** Depends when dpkg-shlibdeps cannot tell (no dpkg-dev): what an official Node 20 binary and the addons need. */
const FALLBACK_SHLIBS = "libc6 (>= 2.28), libgcc-s1 (>= 3.0), libstdc++6 (>= 10)";
const DEFAULT_MAINTAINER = "Sluice developers <sluice-dns@users.noreply.github.com>";

const run = promisify(execFile);

/** Debian's name for this machine's architecture. */
export function debianArch(arch: string = process.arch): string {
  const names: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "armhf", ia32: "i386", ppc64: "ppc64el", s390x: "s390x", riscv64: "riscv64", loong64: "loong64" };
  const name = names[arch];
  if (!name) throw new Error(`no Debian architecture for ${arch}`);
  return name;
}

function defaultDate(): Date {
  const epoch = Number(process.env.SOURCE_DATE_EPOCH);
  return Number.isFinite(epoch) && epoch > 0 ? new Date(epoch * 1000) : new Date();
}

function startsWith(file: string, magic: Buffer): boolean {
  const fd = openSync(file, "r");
  try {
    const head = Buffer.alloc(magic.length);
    return readSync(fd, head, 0, magic.length, 0) === magic.length && head.equals(magic);
  } finally {
    closeSync(fd);
  }
}

const SHEBANG = Buffer.from("#!");
const ELF = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);

/**
 * Modes as Debian wants them: directories 0755, files 0644, executables 0755 only where they are
 * one (a script with #! or an ELF program that was executable; native addons, *.node, stay 0644).
 * Returns the ELF files, for dpkg-shlibdeps.
 */
function normaliseModes(dir: string, elves: string[] = []): string[] {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      normaliseModes(path, elves);
      continue;
    }
    const wasExecutable = (statSync(path).mode & 0o111) !== 0;
    const elf = startsWith(path, ELF);
    if (elf) elves.push(path);
    const executable = wasExecutable && !entry.name.endsWith(".node") && (elf || startsWith(path, SHEBANG));
    chmodSync(path, executable ? 0o755 : 0o644);
  }
  return elves;
}

/** dpkg-shlibdeps' Depends for the ELF files, or the fallback where dpkg-dev is missing. */
async function sharedLibraryDepends(staging: string, elves: string[]): Promise<string> {
  if (elves.length === 0) return "";
  const work = mkdtempSync(join(staging, "..", ".shlibdeps-"));
  try {
    mkdirSync(join(work, "debian"));
    writeFileSync(join(work, "debian", "control"), "Source: sluice\n\nPackage: sluice\nArchitecture: any\n");
    const out = await run("dpkg-shlibdeps", ["-O", "--ignore-missing-info", ...elves.map((e) => `-e${e}`)], { cwd: work, encoding: "utf8" }).then(
      (r) => r.stdout,
      () => "",
    );
    return /^shlibs:Depends=(.*)$/m.exec(out)?.[1] ?? FALLBACK_SHLIBS;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Debug symbols and notes out, as dh_strip does (the staged files are copies). */
function strip(file: string): void {
  const shared = file.endsWith(".node") || file.endsWith(".so");
  execFileSync("strip", ["--remove-section=.comment", "--remove-section=.note", ...(shared ? ["--strip-unneeded"] : []), file]);
}

/**
 * What lintian reports that is right for this package; each is explained in docs/operations.md,
 * "The Debian package". The bundled Node binary is the upstream build (zlib inside, not PIE), and
 * it is the interpreter the node_modules scripts' #! lines name, which lintian cannot know.
 */
export function lintianOverrides(systemNode: boolean): string {
  const lines = ["# Explained in docs/operations.md, \"The Debian package\".", "# Not uploaded to Debian: there is no ITP bug to close.", "initial-upload-closes-no-bugs"];
  if (!systemNode) {
    lines.push(
      "# /usr/lib/sluice/node is the upstream Node.js binary: it links its own zlib and is built without PIE.",
      "embedded-library zlib [usr/lib/sluice/node]",
      "hardening-no-pie [usr/lib/sluice/node]",
      "# Scripts with #!/usr/bin/env node run on /usr/lib/sluice/node, not on the nodejs package.",
      "missing-dep-for-interpreter node (does not satisfy nodejs:any) [usr/lib/sluice/*]",
    );
  }
  return lines.join("\n") + "\n";
}

function duKiB(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += statSync(join(entry.parentPath, entry.name)).size;
  }
  return Math.ceil(bytes / 1024);
}

function md5sums(staging: string): string {
  const lines: string[] = [];
  for (const entry of readdirSync(staging, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    const rel = relative(staging, path);
    if (!entry.isFile() || rel.startsWith("DEBIAN/") || rel.startsWith("etc/")) continue;
    lines.push(`${createHash("md5").update(readFileSync(path)).digest("hex")}  ${rel}`);
  }
  return lines.sort((a, b) => a.slice(34).localeCompare(b.slice(34))).join("\n") + "\n";
}

function put(staging: string, path: string, content: string | Buffer, mode = 0o644): void {
  const file = join(staging, path);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, content);
  chmodSync(file, mode);
}

/** Builds the .deb into `outDir` (dpkg-deb must be installed). */
export async function buildDeb(o: DebOptions): Promise<BuiltDeb> {
  const pkg = JSON.parse(readFileSync(join(o.root, "package.json"), "utf8")) as { version: string; description?: string };
  const upstream = o.version ?? pkg.version;
  const version = `${upstream}-${o.revision ?? "1"}`;
  const arch = debianArch();
  const date = o.date ?? defaultDate();
  const maintainer = o.maintainer ?? (process.env.DEBFULLNAME && process.env.DEBEMAIL ? `${process.env.DEBFULLNAME} <${process.env.DEBEMAIL}>` : DEFAULT_MAINTAINER);
  const systemNode = o.systemNode === true;
  const files = join(o.root, "packaging", "deb");
  mkdirSync(o.outDir, { recursive: true });
  const staging = mkdtempSync(join(o.outDir, ".deb-staging-"));
  try {
    const lib = join(staging, "usr", "lib", "sluice");
    stageProgram(o.root, lib, upstream, "copy", true);
    if (!systemNode) copyFileSync(process.execPath, join(lib, "node"));
    // The CLI has a #! line: executable, as lintian asks (the launcher runs it with node either way).
    chmodSync(join(lib, BUILT_CLI), 0o755);
    const marker: PackageMarker = { manager: "dpkg", package: "sluice", version, node: systemNode ? "system" : "bundled" };
    put(staging, `usr/lib/sluice/${PACKAGE_MARKER}`, JSON.stringify(marker, null, 2) + "\n");
    const elves = normaliseModes(staging);
    if (!systemNode) chmodSync(join(lib, "node"), 0o755);
    for (const elf of elves) strip(elf);

    const launcher = readFileSync(join(files, "launcher"), "utf8").replaceAll("@NODE@", systemNode ? "/usr/bin/node" : "/usr/lib/sluice/node");
    put(staging, "usr/bin/sluice", launcher, 0o755);
    put(staging, "etc/sluice/sluice.yaml", readFileSync(join(files, "sluice.yaml")));
    put(staging, "lib/systemd/system/sluice.service", readFileSync(join(files, "sluice.service")));
    put(staging, "usr/share/man/man8/sluice.8.gz", gzipSync(await manPage(o.root, upstream, date), { level: 9 }));
    put(staging, "usr/share/doc/sluice/copyright", copyright(o.root, !systemNode, date.getUTCFullYear()));
    put(staging, "usr/share/doc/sluice/changelog.Debian.gz", gzipSync(changelog(version, maintainer, date, systemNode), { level: 9 }));
    if (existsSync(join(o.root, "README.md"))) put(staging, "usr/share/doc/sluice/README.md", readFileSync(join(o.root, "README.md")));
    put(staging, "usr/share/lintian/overrides/sluice", lintianOverrides(systemNode));

    const depends = ["adduser", await sharedLibraryDepends(staging, elves), systemNode ? `nodejs (>= ${MIN_NODE})` : ""].filter((d) => d !== "").join(", ");
    const control = [
      "Package: sluice",
      `Version: ${version}`,
      `Architecture: ${arch}`,
      `Maintainer: ${maintainer}`,
      `Installed-Size: ${duKiB(staging)}`,
      `Depends: ${depends}`,
      "Section: net",
      "Priority: optional",
      "Homepage: https://github.com/sluice-dns/sluice",
      "Description: DNS policy engine with plugins and a management API",
      " Sluice answers DNS queries by running the plugins its YAML configuration",
      " declares (block lists, local records, caches, forwarding over UDP, TCP, DoT",
      " and DoH, per-client rules), composed into sequences, and is managed through",
      " an HTTP API and a web dashboard.",
      " .",
      " This package runs it as a hardened systemd service on port 53.",
      "",
    ].join("\n");
    put(staging, "DEBIAN/control", control);
    put(staging, "DEBIAN/conffiles", "/etc/sluice/sluice.yaml\n");
    for (const script of ["postinst", "prerm", "postrm"]) put(staging, `DEBIAN/${script}`, readFileSync(join(files, script)), 0o755);
    put(staging, "DEBIAN/md5sums", md5sums(staging));

    const file = join(o.outDir, `sluice_${version}_${arch}.deb`);
    const compression = o.compression ?? "xz";
    await run("dpkg-deb", ["--root-owner-group", `-Z${compression}`, ...(o.compressionLevel === undefined ? [] : [`-z${o.compressionLevel}`]), "--build", staging, file], { env: { ...process.env, SOURCE_DATE_EPOCH: String(Math.floor(date.getTime() / 1000)) } });
    return { file, version, arch, control };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
