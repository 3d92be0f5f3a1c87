// npm run package:deb [-- --out DIR --version V --revision R --system-node --compression xz|gzip|zstd|none --maintainer "Name <addr>"]
// Builds sluice_<version>-<revision>_<arch>.deb from the release build (see src/release/deb.ts).

import { resolve } from "node:path";
import { PACKAGE_ROOT } from "../version.js";
import { buildDeb, type DebCompression, type DebOptions } from "./deb.js";

const USAGE = "usage: npm run package:deb -- [--out DIR] [--version V] [--revision R] [--system-node] [--compression xz|gzip|zstd|none] [--maintainer 'Name <address>']";
const COMPRESSIONS: readonly string[] = ["xz", "gzip", "zstd", "none"];

function parse(argv: string[]): DebOptions {
  const o: DebOptions = { root: PACKAGE_ROOT, outDir: resolve("release") };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--system-node") {
      o.systemNode = true;
      continue;
    }
    const value = argv[++i];
    if (value === undefined) throw new Error(USAGE);
    if (flag === "--out") o.outDir = resolve(value);
    else if (flag === "--version") o.version = value;
    else if (flag === "--revision") o.revision = value;
    else if (flag === "--maintainer") o.maintainer = value;
    else if (flag === "--compression" && COMPRESSIONS.includes(value)) o.compression = value as DebCompression;
    else throw new Error(USAGE);
  }
  return o;
}

try {
  const started = Date.now();
  const built = await buildDeb(parse(process.argv.slice(2)));
  process.stdout.write(`${built.file}\n  built in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
} catch (err) {
  process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
