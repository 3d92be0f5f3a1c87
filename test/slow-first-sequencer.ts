// Starts the longest test files first. Without vitest's cache (a fresh clone, CI) files are ordered
// by size, and a long file that starts late keeps one worker busy after the others are done: the
// whole run waits for it. The files below took 20 s or more in a full run on the 2-core machine
// (the slowest-files list every run prints); the rest keep vitest's own order after them.
import { BaseSequencer, type TestSpecification } from "vitest/node";

export const SLOW_FIRST = [
  "test/model/config-follow.model.test.ts",
  "test/integration/upgrade-release.test.ts",
  "test/model/app.model.test.ts",
  "test/integration/cluster-example.test.ts",
  "test/integration/upgrade-api.test.ts",
  "test/integration/api-config-kill.test.ts",
  "test/integration/upgrade-cli.test.ts",
  // the timed project
  "test/integration/doh-holders.test.ts",
  "test/integration/config-from-limits.test.ts",
  "test/browser/domain-sets.test.ts",
  "test/integration/log-stream-load.test.ts",
  "test/integration/query-recorder-stream-load.test.ts",
  "test/integration/api-config-limits.test.ts",
  "test/browser/dashboard.test.ts",
];

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = SLOW_FIRST.findIndex((p) => f.moduleId.endsWith(`/${p}`));
      return i < 0 ? SLOW_FIRST.length : i;
    };
    // Stable: projects stay in their order (groupOrder), and within one the listed files lead.
    return sorted
      .map((f, i) => ({ f, i }))
      .sort((a, b) => (a.f.project.name === b.f.project.name ? rank(a.f) - rank(b.f) || a.i - b.i : a.i - b.i))
      .map(({ f }) => f);
  }
}
