// The documents of the Debian package: sluice(8) made from the CLI's own --help texts, the
// copyright file (Sluice's licence and each bundled package's), and changelog.Debian.

import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { BUILT_CLI } from "../upgrade/release.js";
import { productionPackages } from "./build.js";

/** The --help texts of the built CLI (dist/bundle/cli.js), each command's under its own heading. */
const HELP_SECTIONS: { title: string; argv: string[] }[] = [
  { title: "USAGE", argv: ["--help"] },
  { title: "UPGRADE", argv: ["upgrade", "--help"] },
  { title: "PROBE", argv: ["probe", "--help"] },
  { title: "PASSWD", argv: ["passwd", "--help"] },
];

/** One line of text as roff: backslashes escaped, a leading . or ' kept literal, dashes as text. */
function roffLine(line: string): string {
  const escaped = line.replace(/\\/g, "\\e").replace(/—/g, "\\(em").replace(/-/g, "\\-");
  return /^[.']/.test(escaped) ? `\\&${escaped}` : escaped;
}

function roffBlock(text: string): string {
  return [".nf", ...text.replace(/\n+$/, "").split("\n").map(roffLine), ".fi"].join("\n");
}

/** sluice(8): the help texts printed by `node dist/bundle/cli.js ... --help` in `root`, verbatim. */
export async function manPage(root: string, version: string, date: Date): Promise<string> {
  const cli = join(root, BUILT_CLI);
  const sections = await Promise.all(
    HELP_SECTIONS.map(async ({ title, argv }) => {
      const { stdout } = await promisify(execFile)(process.execPath, [cli, ...argv], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
      return `.SH ${title}\n${roffBlock(stdout)}`;
    }),
  );
  const day = date.toISOString().slice(0, 10);
  return [
    `.TH SLUICE 8 "${day}" "sluice ${version}" "System Administration"`,
    ".SH NAME",
    "sluice \\- a DNS policy engine",
    ".SH SYNOPSIS",
    ".B sluice start",
    "[\\fB\\-c\\fR \\fIFILE\\fR] [\\fB\\-d\\fR \\fIDIR\\fR] [\\fB\\-l\\fR \\fILEVEL\\fR]",
    ".br",
    ".B sluice check",
    "[\\fB\\-c\\fR \\fIFILE\\fR] [\\fB\\-d\\fR \\fIDIR\\fR] [\\fB\\-\\-self\\-test\\fR]",
    ".br",
    ".B sluice",
    "\\fBupgrade\\fR|\\fBprobe\\fR|\\fBpasswd\\fR ...",
    ".SH DESCRIPTION",
    "Sluice answers DNS queries by running the plugins its configuration declares, composed into",
    "sequences, and is managed through an HTTP API and a dashboard.",
    "The sections below are the program's own help texts.",
    ...sections,
    ".SH FILES",
    ".TP",
    ".I /etc/sluice/sluice.yaml",
    "the configuration the service runs (a conffile)",
    ".TP",
    ".I /var/lib/sluice",
    "the service's data: relative paths in the configuration resolve here",
    ".TP",
    ".I /lib/systemd/system/sluice.service",
    "the hardened systemd unit; \\fBsystemctl reload sluice\\fR sends SIGHUP, which reloads the configuration",
    ".SH SEE ALSO",
    ".BR systemctl (1),",
    ".BR dig (1),",
    "/usr/share/doc/sluice/README.md",
    "",
  ].join("\n");
}

interface PackageJson {
  name?: string;
  version?: string;
  license?: string | { type?: string };
}

function licenceName(license: PackageJson["license"]): string | undefined {
  return typeof license === "string" ? license : license?.type;
}

/** Sluice's licence text, then every bundled npm package (and Node itself when bundled) with its licence. */
export function copyright(root: string, bundledNode: boolean, year: number): string {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as PackageJson;
  const licenceFile = ["LICENSE", "LICENSE.md", "LICENCE"].map((f) => join(root, f)).find((f) => existsSync(f));
  const lines = [
    "Sluice, a DNS policy engine",
    "Upstream: https://github.com/sluice-dns/sluice",
    "",
    "Files: /usr/lib/sluice/dist, /usr/bin/sluice, /etc/sluice, the unit and these documents",
    `Copyright (C) ${year} the Sluice contributors`,
    `License: ${licenceName(pkg.license) ?? "MIT"}`,
    "",
    ...(licenceFile ? readFileSync(licenceFile, "utf8").trimEnd().split("\n").map((l) => ` ${l.trim() === "" ? "." : l}`) : MIT_TEXT.split("\n").map((l) => ` ${l === "" ? "." : l}`)),
    "",
    "Bundled under /usr/lib/sluice/node_modules, each with its own licence file in its directory",
    "(the Apache-2.0 licence is also in /usr/share/common-licenses/Apache-2.0):",
  ];
  for (const dir of productionPackages(root).sort()) {
    const file = join(root, dir, "package.json");
    if (!existsSync(file)) continue;
    const p = JSON.parse(readFileSync(file, "utf8")) as PackageJson;
    const licence = licenceName(p.license) ?? "see its directory";
    lines.push(` ${p.name ?? dir} ${p.version ?? ""}: ${licence}`);
  }
  if (bundledNode) {
    lines.push(
      "",
      `Bundled as /usr/lib/sluice/node: Node.js ${process.version}, https://nodejs.org/`,
      "Copyright: Node.js contributors; License: MIT, with the licences of the libraries it includes",
      "(V8, libuv, OpenSSL, ICU, zlib, ...), listed in https://github.com/nodejs/node/blob/main/LICENSE",
    );
  }
  return lines.join("\n") + "\n";
}

const MIT_TEXT = `Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files (the "Software"), to deal in the Software without
restriction, including without limitation the rights to use, copy, modify, merge, publish,
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.`;

/** The date as a Debian changelog writes it: "Sat, 28 Nov 2026 02:16:00 +0000". */
export function changelogDate(date: Date): string {
  return date.toUTCString().replace(/GMT$/, "+0000");
}

export function changelog(debVersion: string, maintainer: string, date: Date, systemNode: boolean): string {
  return [
    `sluice (${debVersion}) unstable; urgency=medium`,
    "",
    "  * Built from the Sluice release build by npm run package:deb",
    `    (${systemNode ? "runs on the nodejs package" : `bundles Node.js ${process.version} as /usr/lib/sluice/node`}).`,
    "",
    ` -- ${maintainer}  ${changelogDate(date)}`,
    "",
  ].join("\n");
}
