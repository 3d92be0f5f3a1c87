// npm run release [-- --out DIR --version V --base-url URL --repository OWNER/NAME --sign-key PEM]
// Builds the release artefact for this platform and its release JSON (see src/release/build.ts).

import { resolve } from "node:path";
import { PACKAGE_ROOT } from "../version.js";
import { buildRelease, type BuildOptions } from "./build.js";

const FLAGS: Record<string, keyof Omit<BuildOptions, "root" | "gzipLevel">> = {
  "--out": "outDir",
  "--version": "version",
  "--base-url": "baseUrl",
  "--repository": "repository",
  "--sign-key": "signKey",
};

async function main(argv: string[]): Promise<void> {
  const options: BuildOptions = { root: PACKAGE_ROOT, outDir: resolve("release") };
  for (let i = 0; i < argv.length; i += 2) {
    const key = FLAGS[argv[i]];
    const value = argv[i + 1];
    if (!key || value === undefined) throw new Error(`usage: npm run release -- [${Object.keys(FLAGS).map((f) => `${f} VALUE`).join("] [")}]`);
    options[key] = key === "outDir" || key === "signKey" ? resolve(value) : value;
  }
  const started = Date.now();
  const built = await buildRelease(options);
  process.stdout.write(`${built.artefact}\n  sha256:${built.sha256}\n${built.releaseJson}\n  built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
