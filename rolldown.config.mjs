// The program as it runs: `npm run build` compiles src/, machines/ and actors/ with tsc into dist/, then
// this bundles the compiled entry points and the packages they import into dist/bundle/, which
// bin/sluice runs. Node's module loader spent ~300 ms of every start on ~540 files (a third of them
// packages'); the bundle loads a few dozen, so `sluice start` and every CLI command start ~40 % sooner.
//
// One entry per file Sluice starts a process or a thread from. Each is named as the code looks it up
// beside itself (protocol.ts workerFile, validate-pool.ts, unpack.ts, app/workers/pool.ts). Shared code
// goes into chunks beside them. better-sqlite3 stays a package: it loads its native addon by path.
// Packages loaded on first use (src/lazy-module.ts, @redis/client) are required at run time from
// node_modules, as before.
import { defineConfig } from "rolldown";

export default defineConfig({
  input: {
    cli: "dist/src/cli.js",
    main: "dist/src/app/workers/main.js",
    "validate-worker": "dist/src/app/validate-worker.js",
    "unpack-worker": "dist/src/upgrade/unpack-worker.js",
    "writer-worker": "dist/src/plugins/executors/query-recorder/writer-worker.js",
    "reader-worker": "dist/src/plugins/executors/query-recorder/reader-worker.js",
  },
  platform: "node",
  external: [/^better-sqlite3$/, /^pg-native$/],
  logLevel: "warn",
  output: { dir: "dist/bundle", format: "esm", entryFileNames: "[name].js", chunkFileNames: "[name]-[hash].js", cleanDir: true },
});
