// Small release artefacts for upgrade tests, written byte by byte (ustar + gzip) so a test can put
// in exactly what a hostile artefact would: symbolic and hard links, `..` and absolute paths,
// setuid files, devices. A well-formed one holds the manifest, a bin/sluice that answers the smoke
// test with a chosen exit status, and a stub dist/bundle/cli.js. Releases must be signed (issue 22):
// the tests' Ed25519 key pair lives here (one per test process), with the public key as a PEM file
// for upgrade.public_key and the private key as one for `npm run release --sign-key`.

import { generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { artefactName, artefactRoot, BUILT_CLI, thisPlatform, type PlatformTarget } from "../../src/upgrade/release.js";
import { MANIFEST_FILE, type ReleaseManifest } from "../../src/upgrade/unpack.js";
import { tempDir } from "./sluice.js";

export const RELEASE_KEYS = generateKeyPairSync("ed25519");

let keyDir: string | null = null;
function keyFiles(): string {
  if (keyDir === null) {
    keyDir = tempDir("sluice-release-key-");
    writeFileSync(join(keyDir, "release.pub"), RELEASE_KEYS.publicKey.export({ type: "spki", format: "pem" }));
    writeFileSync(join(keyDir, "release.pem"), RELEASE_KEYS.privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  }
  return keyDir;
}

/** The PEM file of the tests' public key (upgrade.public_key). */
export const releasePublicKeyFile = (): string => join(keyFiles(), "release.pub");
/** The PEM file of the tests' private key (buildRelease's signKey). */
export const releasePrivateKeyFile = (): string => join(keyFiles(), "release.pem");

/** The detached signature of an artefact, as `npm run release` publishes it (base64 text). */
export const signatureOf = (body: Buffer, key: KeyObject = RELEASE_KEYS.privateKey): Buffer => Buffer.from(sign(null, body, key).toString("base64") + "\n");

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

/** The tar bytes of exactly these entries, with the two zero blocks that end an archive unless `end` is false. */
function tarBytes(entries: TarEntry[], end = true): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.type === undefined || e.type === "0" ? Buffer.from(e.content ?? "") : Buffer.alloc(0);
    parts.push(header(e, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  if (end) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** A gzipped tar of exactly these entries. */
export function tarGz(entries: TarEntry[]): Buffer {
  return gzipSync(tarBytes(entries));
}

const BOMB_PIECE = 64 * 1024 * 1024;

/**
 * A release artefact of `version` that inflates to about `inflated` bytes of zeros: after the end of
 * its tar ("trailing", the filed repro), or as the contents of 64 MiB files inside it ("entries").
 * Built from gzip members (gunzip reads concatenated members as one stream), the 64 MiB of zeros
 * compressed once and repeated: a second to make, where one 4 GiB member would take half a minute.
 */
export function zeroBomb(version: string, inflated: number, where: "trailing" | "entries"): FakeRelease {
  const release = fakeRelease(version);
  const zeros = gzipSync(Buffer.alloc(BOMB_PIECE), { level: 9 });
  const pieces = Math.ceil(inflated / BOMB_PIECE);
  if (where === "trailing") return { name: release.name, body: Buffer.concat([release.body, ...Array.from({ length: pieces }, () => zeros)]) };
  const root = artefactRoot(version);
  const parts = [gzipSync(tarBytes(releaseEntries(version, {}), false))];
  for (let i = 0; i < pieces; i++) parts.push(gzipSync(header({ path: `${root}/blob-${i}.bin` }, BOMB_PIECE)), zeros);
  parts.push(gzipSync(Buffer.alloc(1024)));
  return { name: release.name, body: Buffer.concat(parts) };
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
  return { name: artefactName(version, opts.target ?? thisPlatform()), body: tarGz(releaseEntries(version, opts)) };
}

function releaseEntries(version: string, opts: { smokeExit?: number; target?: PlatformTarget; manifest?: Partial<ReleaseManifest>; extra?: TarEntry[] }): TarEntry[] {
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
  return [
    { path: `${root}/`, type: "5" },
    { path: `${root}/bin/`, type: "5" },
    { path: `${root}/bin/sluice`, content: script, mode: 0o755 },
    { path: `${root}/dist/`, type: "5" },
    { path: `${root}/dist/bundle/`, type: "5" },
    { path: `${root}/${BUILT_CLI}`, content: "// stub\n" },
    { path: `${root}/${MANIFEST_FILE}`, content: JSON.stringify(manifest) },
    ...(opts.extra ?? []),
  ];
}
