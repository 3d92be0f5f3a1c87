// The release artefact, built from a checkout without network access:
// sluice-<version>-<platform>-<arch>-node<major>.tar.gz holding sluice-<version>/ with dist/,
// package.json, the production node_modules copied from the installed tree (native addons as built
// here, without their build intermediates), config/, the WebUI when built, docs, bin/sluice and
// sluice-release.json; and the release JSON in the GitHub releases API shape beside it.

import { createHash, createPrivateKey, sign } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { create } from "tar";
import { artefactName, artefactRoot, BUILT_CLI, signatureName, thisPlatform, type Release, type ReleaseAsset } from "../upgrade/release.js";
import { MANIFEST_FILE, type ReleaseManifest } from "../upgrade/unpack.js";

export interface BuildOptions {
  /** The checkout: package.json, package-lock.json, node_modules, dist/ (built). */
  root: string;
  outDir: string;
  /** Version written into the artefact's package.json (default: the checkout's). */
  version?: string;
  /** Where the artefact will be downloaded from (its browser_download_url is <baseUrl>/<name>). */
  baseUrl?: string;
  /** `<owner>/<name>`, for the default URLs. */
  repository?: string;
  /** Ed25519 private key (PEM file): the artefact's signature is published as <name>.sig. */
  signKey?: string;
  /** gzip level, 1 (fast) to 9 (small). */
  gzipLevel?: number;
}

export interface BuiltRelease {
  artefact: string;
  /** The release JSON written beside the artefact (assets of earlier builds of this version kept). */
  releaseJson: string;
  release: Release;
  sha256: string;
}

interface LockPackage {
  dev?: boolean;
  link?: boolean;
}

/** Directories under node_modules/ of the packages production needs, per package-lock.json. */
export function productionPackages(root: string): string[] {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages?: Record<string, LockPackage> };
  return Object.entries(lock.packages ?? {})
    .filter(([path, p]) => path.startsWith("node_modules/") && p.dev !== true && p.link !== true)
    .map(([path]) => path);
}

/** How staged files are made: hard links to the checkout (the tarball), or copies (the .deb, whose modes are set). */
export type StageMode = "link" | "copy";

/**
 * Mirrors a tree into the staging directory: directories made, files hard-linked (copied when the
 * staging directory is on another file system, or when `mode` is "copy"), only where
 * `keep(path parts, is a directory)` says so. Linking instead of copying saves most of the build
 * (~7 700 files, several seconds of copying); nothing in a linked staging tree is written to, and
 * tar is told not to store links (see `create` below).
 */
function mirror(from: string, to: string, keep: (rel: string[], isDir: boolean) => boolean = () => true, rel: string[] = [], mode: StageMode = "link"): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const src = join(from, entry.name);
    const dst = join(to, entry.name);
    const path = [...rel, entry.name];
    if (entry.isSymbolicLink()) throw new Error(`${src} is a symbolic link; a release holds regular files only`);
    if (!keep(path, entry.isDirectory())) continue;
    if (entry.isDirectory()) {
      mirror(src, dst, keep, path, mode);
    } else if (entry.isFile()) {
      if (mode === "copy") {
        copyFileSync(src, dst);
        continue;
      }
      try {
        linkSync(src, dst);
      } catch (err) {
        if (!["EXDEV", "EPERM", "EMLINK"].includes((err as NodeJS.ErrnoException).code ?? "")) throw err;
        copyFileSync(src, dst);
      }
    }
  }
}

/** A package's own development files, left out of the .deb (`prune`): nothing requires them at run time. */
const DEV_DIRS = new Set(["test", "tests", "__tests__", "spec", "integration", "benchmark", "benchmarks", "bench", "example", "examples", "docs", ".github", ".husky", "scripts"]);
/**
 * Repository and documentation files, TypeScript sources and declarations, source maps (half the files
 * of node_modules: Node runs none of them, and lintian and dpkg pay for each); licence files stay.
 */
const DEV_FILE = /^(?:\.gitattributes|\.npmignore|\.eslintrc(?:\..*)?|\.editorconfig|\.travis\.yml|\.prettierrc.*|.*\.html|.*\.(?:[mc]?ts|map)|(?:readme|changelog|history|security|contributing)(?:\.md|\.markdown|\.txt)?)$/i;

/** Mirrors one package: its nested node_modules are packages of their own; native ones keep only the built addon. */
function copyPackage(from: string, to: string, mode: StageMode, prune: boolean): void {
  const native = existsSync(join(from, "binding.gyp"));
  const keep = (parts: string[], isDir: boolean): boolean => {
    if (parts[0] === "node_modules" || parts.includes(".bin")) return false;
    if (prune && ((isDir && parts.length === 1 && DEV_DIRS.has(parts[0])) || (!isDir && DEV_FILE.test(parts[parts.length - 1])))) return false;
    if (native && (parts[0] === "deps" || parts[0] === "src")) return false;
    if (native && parts[0] === "build") {
      const rel = parts.join("/");
      return isDir ? parts.length <= 2 && (parts.length === 1 || parts[1] === "Release") : parts.length === 3 && parts[1] === "Release" && rel.endsWith(".node") && !rel.endsWith("test_extension.node");
    }
    return true;
  };
  mirror(from, to, keep, [], mode);
}

/** tar's hard-link detection off: every staged file is a link to the checkout, each stored as a file. */
class NoLinks extends Map<`${number}:${number}`, string> {
  override set(): this {
    return this;
  }
}

function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/**
 * The program itself into `top`: dist/bundle (the program as bin/sluice runs it) and dist/webui, package.json with
 * `version`, the production node_modules (native addons as built here; with `prune`, without their
 * tests, examples and repository files) and config/. The release tarball and the Debian package
 * (src/release/deb.ts) both start from this.
 */
export function stageProgram(root: string, top: string, version: string, mode: StageMode, prune = false): void {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
  if (!existsSync(join(root, BUILT_CLI))) throw new Error(`${join(root, "dist")} is not built; run npm run build first`);
  for (const d of ["bundle", "webui"]) if (existsSync(join(root, "dist", d))) mirror(join(root, "dist", d), join(top, "dist", d), undefined, [], mode);
  const { devDependencies: _dev, scripts: _scripts, ...shipped } = pkg;
  writeFileSync(join(top, "package.json"), JSON.stringify({ ...shipped, version }, null, 2) + "\n");
  for (const p of productionPackages(root)) {
    const from = join(root, p);
    // Optional dependencies for other platforms are not installed here.
    if (existsSync(from)) copyPackage(from, join(top, p), mode, prune);
  }
  mirror(join(root, "config"), join(top, "config"), undefined, [], mode);
  const webui = join(root, "webui", "dist");
  if (existsSync(webui)) mirror(webui, join(top, "webui"), undefined, [], mode);
}

/** Builds the artefact and the release JSON into `outDir`. */
export async function buildRelease(o: BuildOptions): Promise<BuiltRelease> {
  const pkg = JSON.parse(readFileSync(join(o.root, "package.json"), "utf8")) as Record<string, unknown> & { version: string };
  const version = o.version ?? pkg.version;
  if (!existsSync(join(o.root, BUILT_CLI))) throw new Error(`${join(o.root, "dist")} is not built; run npm run build first`);
  const target = thisPlatform();
  const name = artefactName(version, target);
  mkdirSync(o.outDir, { recursive: true });
  const staging = mkdtempSync(join(o.outDir, ".staging-"));
  try {
    const top = join(staging, artefactRoot(version));
    stageProgram(o.root, top, version, "link");
    for (const doc of ["README.md", "LICENSE"]) if (existsSync(join(o.root, doc))) copyFileSync(join(o.root, doc), join(top, doc));
    if (existsSync(join(o.root, "docs"))) mirror(join(o.root, "docs"), join(top, "docs"));
    mkdirSync(join(top, "bin"), { recursive: true });
    copyFileSync(join(o.root, "bin", "sluice"), join(top, "bin", "sluice"));
    chmodSync(join(top, "bin", "sluice"), 0o755);
    const manifest: ReleaseManifest = {
      name: "sluice",
      version,
      platform: target.platform,
      arch: target.arch,
      node_major: target.nodeMajor,
      node_abi: process.versions.modules,
      built_at: new Date().toISOString(),
    };
    writeFileSync(join(top, MANIFEST_FILE), JSON.stringify(manifest, null, 2) + "\n");
    const artefact = join(o.outDir, name);
    await create({ gzip: { level: o.gzipLevel ?? 6 }, file: artefact, cwd: staging, portable: true, linkCache: new NoLinks() }, [artefactRoot(version)]);
    return writeReleaseJson(o, version, artefact);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function writeReleaseJson(o: BuildOptions, version: string, artefact: string): BuiltRelease {
  const repository = o.repository ?? process.env.GITHUB_REPOSITORY ?? "sluice-dns/sluice";
  const tag = `v${version}`;
  const baseUrl = (o.baseUrl ?? `https://github.com/${repository}/releases/download/${tag}`).replace(/\/+$/, "");
  const digest = sha256(artefact);
  const assets: ReleaseAsset[] = [{ name: basename(artefact), browser_download_url: `${baseUrl}/${basename(artefact)}`, size: statSync(artefact).size, digest: `sha256:${digest}` }];
  if (o.signKey) {
    const key = createPrivateKey(readFileSync(o.signKey));
    const sigFile = join(dirname(artefact), signatureName(basename(artefact)));
    writeFileSync(sigFile, sign(null, readFileSync(artefact), key).toString("base64") + "\n");
    assets.push({ name: basename(sigFile), browser_download_url: `${baseUrl}/${basename(sigFile)}`, size: statSync(sigFile).size, digest: `sha256:${sha256(sigFile)}` });
  }
  const releaseJson = join(o.outDir, `release-${version}.json`);
  // Builds on other platforms add their assets to the same release.
  const earlier = existsSync(releaseJson) ? (JSON.parse(readFileSync(releaseJson, "utf8")) as Release) : null;
  const names = new Set(assets.map((a) => a.name));
  const release: Release & Record<string, unknown> = {
    tag_name: tag,
    name: `Sluice ${version}`,
    draft: false,
    prerelease: version.includes("-"),
    html_url: `https://github.com/${repository}/releases/tag/${tag}`,
    published_at: new Date().toISOString(),
    assets: [...(earlier?.assets ?? []).filter((a) => !names.has(a.name)), ...assets],
  };
  writeFileSync(releaseJson, JSON.stringify(release, null, 2) + "\n");
  return { artefact, releaseJson, release, sha256: digest };
}
