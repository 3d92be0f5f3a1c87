// A release host for upgrade tests: a real HTTP server on 127.0.0.1 answering the GitHub-shaped
// release routes (/repos/<owner>/<name>/releases/latest, /tags/<tag>, the list) and serving asset
// files, with switches for what can go wrong (a stalled download, a gate the test opens) and a
// record of every request (path, authorization header), so a test can tell nothing was fetched.

import { createHash, type KeyObject } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { signatureName, type Release, type ReleaseAsset } from "../../src/upgrade/release.js";
import { signatureOf } from "./fake-release.js";

export interface HostRequest {
  path: string;
  authorization: string | null;
}

export interface ReleaseHost {
  /** http://127.0.0.1:<port> */
  url: string;
  /** The value for upgrade.release_api. */
  api: string;
  requests: HostRequest[];
  /** Serves `release` as the newest (and as its tag); its assets' bodies come from `files`. */
  publish(release: Release, files: Record<string, Buffer>): void;
  /** Downloads of this asset never answer (the upgrade's timeout must end them). */
  stall(name: string | null): void;
  /** Requests for the release record wait until the returned function is called. */
  hold(): () => void;
  close(): Promise<void>;
}

export const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** `files` with the detached signature (<name>.sig, by the tests' key unless `key` says) of every artefact. */
export function signed(files: Record<string, Buffer>, key?: KeyObject): Record<string, Buffer> {
  const out = { ...files };
  for (const [name, body] of Object.entries(files)) if (name.endsWith(".tar.gz")) out[signatureName(name)] = signatureOf(body, key);
  return out;
}

/** A release record for `files`, each asset with its digest (unless `noDigest` lists it). */
export function releaseOf(version: string, downloadBase: string, files: Record<string, Buffer>, opts: { noDigest?: string[]; digestOf?: Record<string, Buffer> } = {}): Release {
  const assets: ReleaseAsset[] = Object.entries(files).map(([name, body]) => ({
    name,
    browser_download_url: `${downloadBase}/dl/${name}`,
    size: body.length,
    ...(opts.noDigest?.includes(name) ? {} : { digest: `sha256:${sha256(opts.digestOf?.[name] ?? body)}` }),
  }));
  return { tag_name: `v${version}`, prerelease: version.includes("-"), html_url: `https://example.test/releases/tag/v${version}`, assets };
}

export async function startReleaseHost(repository = "test/sluice"): Promise<ReleaseHost> {
  let release: Release | null = null;
  let files: Record<string, Buffer> = {};
  let stalled: string | null = null;
  let gate: Promise<void> | null = null;
  const requests: HostRequest[] = [];
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    requests.push({ path, authorization: req.headers.authorization ?? null });
    open.add(res);
    res.on("close", () => open.delete(res));
    const json = (body: unknown, status = 200): void => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const base = `/repos/${repository}/releases`;
    if (path.startsWith(base)) {
      void (gate ?? Promise.resolve()).then(() => {
        if (!release) return json({ message: "Not Found" }, 404);
        if (path === `${base}/latest` || path === `${base}/tags/${release.tag_name}`) return json(release);
        if (path === base) return json([release]);
        return json({ message: "Not Found" }, 404);
      });
      return;
    }
    const name = path.startsWith("/dl/") ? decodeURIComponent(path.slice(4)) : null;
    const body = name !== null ? files[name] : undefined;
    if (name !== null && name === stalled) return; // never answers
    if (!body) return json({ message: "Not Found" }, 404);
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    api: url,
    requests,
    publish(r, f) {
      release = r;
      files = f;
    },
    stall(name) {
      stalled = name;
    },
    hold() {
      let release!: () => void;
      gate = new Promise<void>((resolve) => (release = resolve));
      return () => {
        gate = null;
        release();
      };
    },
    close() {
      for (const res of open) res.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
