import { defineConfig } from "vitest/config";
import SlowestFilesReporter from "./test/slowest-reporter.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Three files at a time on the 2-core machine: most of the suite waits on sockets, child processes and
    // timers, so a third file fills the idle CPU (414 s → 344 s measured); the load tests judge the best of
    // a few tries, since the box is then busier.
    maxWorkers: 3,
    // Tests marked concurrent (the model tests' paths, each its own child process) run two at a time
    // (more only adds CPU contention on a 2-core machine, which the timing checks elsewhere feel).
    maxConcurrency: 2,
    reporters: ["default", new SlowestFilesReporter()],
  },
});
