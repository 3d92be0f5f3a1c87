// Small release artefacts for upgrade tests, written byte by byte (ustar + gzip) so a test can put
// in exactly what a hostile artefact would: symbolic and hard links, `..` and absolute paths,
// setuid files, devices. A well-formed one holds the manifest, a bin/sluice that answers the smoke
// test with a chosen exit status, and a stub dist/src/cli.js.

import { gzipSync } from "node:zlib";
import { artefactName, artefactRoot, thisPlatform, type PlatformTarget } from "../../src/upgrade/release.js";
import { MANIFEST_FILE, type ReleaseManifest } from "../../src/upgrade/unpack.js";

export interface TarEntry {
  path: string;
  /** "0" file, "5" directory, "2" symlink, "1" hard link, "3" character device, "6" FIFO. */
  type?: "0" | "1" | "2" | "3" | "5" | "6";
  content?: string | Buffer;
  mode?: number;
  link?: string;
}

function field(buf: Buffer, offset: number, length: number, value: string): void {
  buf.write(value.slice(0, length), offset, length, "utf8");
}

const octal = (n: number, width: number): string => n.toString(8).padStart(width - 1, "0") + "\0";

function header(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  field(h, 0, 100, e.path);
  field(h, 100, 8, octal(e.mode ?? (e.type === "5" ? 0o755 : 0o644), 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(size, 12));
  field(h, 136, 12, octal(Math.floor(Date.now() / 1000), 12));
  field(h, 148, 8, "        ");
  field(h, 156, 1, e.type ?? "0");
  field(h, 157, 100, e.link ?? "");
  field(h, 257, 6, "ustar\0");
  field(h, 263, 2, "00");
  let sum = 0;
  for (const b of h) sum += b;
  field(h, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

/** A gzipped tar of exactly these entries. */
export function tarGz(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.type === undefined || e.type === "0" ? Buffer.from(e.content ?? "") : Buffer.alloc(0);
    parts.push(header(e, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(parts));
}

export interface FakeRelease {
  name: string;
  body: Buffer;
}

/**
 * A release artefact of `version` whose bin/sluice exits with `smokeExit` (and records its
 * arguments next to itself); `target` changes the platform in its name and manifest, `extra` adds
 * entries (paths are taken as written).
 */
export function fakeRelease(version: string, opts: { smokeExit?: number; target?: PlatformTarget; manifest?: Partial<ReleaseManifest>; extra?: TarEntry[] } = {}): FakeRelease {
  const target = opts.target ?? thisPlatform();
  const root = artefactRoot(version);
  const manifest: ReleaseManifest = {
    name: "sluice",
    version,
    platform: target.platform,
    arch: target.arch,
    node_major: target.nodeMajor,
    node_abi: process.versions.modules,
    built_at: new Date().toISOString(),
    ...opts.manifest,
  };
  const script = `#!/bin/sh\necho "$@" > "$(dirname "$0")/../smoke-args"\nexit ${opts.smokeExit ?? 0}\n`;
  const entries: TarEntry[] = [
    { path: `${root}/`, type: "5" },
    { path: `${root}/bin/`, type: "5" },
    { path: `${root}/bin/sluice`, content: script, mode: 0o755 },
    { path: `${root}/dist/`, type: "5" },
    { path: `${root}/dist/src/`, type: "5" },
    { path: `${root}/dist/src/cli.js`, content: "// stub\n" },
    { path: `${root}/${MANIFEST_FILE}`, content: JSON.stringify(manifest) },
    ...(opts.extra ?? []),
  ];
  return { name: artefactName(version, target), body: tarGz(entries) };
}
