// Prints the ten test files that took longest (wall time from start to end) when a run ends, so the
// files that set the suite's duration are in every run's output.
import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

export default class SlowestFilesReporter implements Reporter {
  private readonly started = new Map<string, number>();
  private readonly took = new Map<string, number>();

  onTestModuleStart(module: TestModule): void {
    this.started.set(module.moduleId, performance.now());
  }

  onTestModuleEnd(module: TestModule): void {
    const start = this.started.get(module.moduleId);
    if (start !== undefined) this.took.set(module.moduleId, performance.now() - start);
  }

  onTestRunEnd(): void {
    const slowest = [...this.took].sort((a, b) => b[1] - a[1]).slice(0, 10);
    if (slowest.length === 0) return;
    const lines = slowest.map(([id, ms]) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${relative(process.cwd(), id)}`);
    process.stdout.write(`\nThe ten slowest test files (wall time):\n${lines.join("\n")}\n`);
  }
}
