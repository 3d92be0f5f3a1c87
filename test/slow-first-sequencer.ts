// Starts the test files known to take longest first (within their project), so they run beside the many
// short files instead of alone at the end: on a fresh clone vitest has no durations cached and orders by
// file size, which put a 70-second file (the .deb build and lintian) near the end of the run. The list
// is the slowest-files report of a full run (test/slowest-reporter.ts); a file not in it keeps vitest's order.
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

const SLOW_FIRST = [
  "test/integration/deb-package.test.ts",
  "test/model/app.model.test.ts",
  "test/integration/cluster-example.test.ts",
  "test/integration/upgrade-release.test.ts",
  "test/integration/api-config-kill.test.ts",
  "test/model/upgrade.model.test.ts",
  "test/integration/upgrade-api.test.ts",
  "test/integration/upgrade-cli.test.ts",
  "test/fuzz/server-fuzz.test.ts",
  // The timed project's (they run after the rest, three at a time).
  "test/integration/config-from-limits.test.ts",
  "test/integration/query-recorder-stream-load.test.ts",
  "test/integration/api-config-limits.test.ts",
  "test/browser/dashboard.test.ts",
];

export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      const i = SLOW_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId));
      return i < 0 ? SLOW_FIRST.length : i;
    };
    const group = (spec: TestSpecification): string => `${spec.project.config.sequence.groupOrder}:${spec.project.name}`;
    // Stable: within a project the listed files move to the front, everything else keeps its place.
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => (group(a.spec) === group(b.spec) ? rank(a.spec) - rank(b.spec) || a.index - b.index : a.index - b.index))
      .map(({ spec }) => spec);
  }
}
