// Packages that most configurations never use (PostgreSQL, SOCKS5, GeoIP databases, semantic versions,
// tar archives) are loaded on first use instead of with the program: every start, `sluice check` and
// `sluice --version` included, paid ~100 ms of CPU to load them. They are CommonJS (or ship a CommonJS
// build), so a synchronous require made on first use keeps their callers synchronous.

import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** `name`'s exports, loaded the first time the returned function is called. */
export function lazyModule<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
