// Starts the longest test files first, so that none of them starts late and sets the end of the run
// (with three files at a time, a 100 s file started last adds its whole length). Vitest orders by the
// durations it cached from the last run, but a fresh clone (CI, a new user) has no cache and would
// order by file size: the files below, longest first, come before everything else.
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** The longest files of a full run (the ten-slowest list printed at the end of every run), longest first. */
const LONGEST = [
  "test/integration/upgrade-release.test.ts",
  "test/integration/api-config-limits.test.ts",
  "test/model/config-follow.model.test.ts",
  "test/model/app.model.test.ts",
  "test/browser/upgrade.test.ts",
  "test/integration/config-from-limits.test.ts",
  "test/integration/query-recorder-stream-load.test.ts",
  "test/integration/cluster-example.test.ts",
  "test/integration/api-config-kill.test.ts",
  "test/integration/provider-reload-load.test.ts",
  "test/integration/doh-holders.test.ts",
  "test/integration/api-logs.test.ts",
];

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const rank = (f: TestSpecification): number => {
      const i = LONGEST.indexOf(relative(process.cwd(), f.moduleId));
      return i < 0 ? LONGEST.length : i;
    };
    return base.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}
