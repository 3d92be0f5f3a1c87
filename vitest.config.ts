import { defineConfig } from "vitest/config";
import SlowestFilesReporter from "./test/slowest-reporter.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // One process per worker runs file after file (no fresh process and module graph per file): the
    // suite spent ~45 s of its wall time starting processes and importing modules between files. The
    // files share nothing they change (each starts its own servers on port 0 and its own temp dirs).
    isolate: false,
    // Two files at a time: most of the suite waits on sockets and child processes, not the CPU. Three
    // measured 339–360 s instead of ~400 s on the 2-core machine, but the load tests' DNS latency bounds
    // and the browser tests' waits then failed now and then (the suite needs ~575 s of CPU, so a third
    // file mostly adds contention): less CPU work, not more files at once, is the way to a shorter run.
    maxWorkers: 2,
    // Tests marked concurrent (the model tests' paths, each its own child process) run two at a time
    // (more only adds CPU contention on a 2-core machine, which the timing checks elsewhere feel).
    maxConcurrency: 2,
    reporters: ["default", new SlowestFilesReporter()],
  },
});
