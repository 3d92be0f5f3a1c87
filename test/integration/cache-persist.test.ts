// Cache persistence: dump on stop and load on start (TTLs reduced by the time in between),
// periodic dumps, corrupt files ignored with a warning, and atomic writes.

import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { MetricsHub } from "../../src/observability/metrics.js";
import { silentLogger } from "../../src/observability/logger.js";
import { decodeDump } from "../../src/plugins/executors/cache/dump.js";
import { CacheExecutor } from "../../src/plugins/executors/cache/index.js";
import { answerIps, query } from "../helpers/dns.js";
import type { Responder } from "../helpers/responder.js";
import { tempDir, type RunningSluice } from "../helpers/sluice.js";
import { asked, cacheSluice, localAnswer, queryContext, run, sleep, upstream } from "./cache-helpers.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function dir(): string {
  const d = tempDir("sluice-cache-dump-");
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

async function up(): Promise<Responder> {
  const r = await upstream();
  cleanups.push(() => r.close());
  return r;
}

/** Starts a Sluice that is stopped at the end unless the test stopped it already. */
async function start(args: string, port: number, clockShift?: { ms: number }): Promise<RunningSluice & { halt(): Promise<void> }> {
  const s = await cacheSluice(args, port, "", clockShift);
  let stopping: Promise<void> | null = null;
  const halt = (): Promise<void> => (stopping ??= s.stop());
  cleanups.push(halt);
  return { ...s, halt };
}

test("entries dumped on stop are served after a restart without asking upstream, with TTLs reduced by the downtime", async () => {
  const file = join(dir(), "cache.dump");
  const r = await up();
  const args = `{ dump_file: "${file}" }`;
  const first = await start(args, r.port);
  for (const n of ["one", "two", "three"]) await query(first.udpPort, `${n}.example`);
  expect(r.seen).toHaveLength(3);
  await first.halt();
  expect(existsSync(file)).toBe(true);
  // 1.2 s of downtime: the second process's cache clock (wall time included) runs that far ahead.
  const second = await start(args, r.port, { ms: 1200 });
  for (const n of ["one", "two", "three"]) {
    const m = await query(second.udpPort, `${n}.example`);
    expect(answerIps(m)).toEqual(["192.0.2.1"]);
    expect(m.answers[0].ttl).toBeLessThanOrEqual(298);
    expect(m.answers[0].ttl).toBeGreaterThanOrEqual(290);
  }
  expect(r.seen).toHaveLength(3);
  expect(second.logs.some((l) => l.msg === "cache dump loaded" && l.entries === 3)).toBe(true);
});

test("a corrupt dump file is reported as a warning and ignored; the cache starts empty and works", async () => {
  const file = join(dir(), "cache.dump");
  writeFileSync(file, "SLUICE-CACHE but then nonsense follows, certainly not a valid dump");
  const r = await up();
  const s = await start(`{ dump_file: "${file}" }`, r.port);
  const warning = s.logs.find((l) => l.level === 40 && l.msg === "cache dump ignored; starting empty");
  expect(warning).toBeDefined();
  expect(String(warning?.file)).toBe(file);
  await query(s.udpPort, "fresh.example");
  await query(s.udpPort, "fresh.example");
  expect(asked(r, "fresh.example")).toBe(1);
});

test("a missing dump file (and directory) is not an error, and dump_interval writes the changes while running", async () => {
  const file = join(dir(), "state", "cache.dump");
  const r = await up();
  const s = await start(`{ dump_file: "${file}", dump_interval: 1 }`, r.port);
  expect(s.logs.some((l) => Number(l.level) >= 40)).toBe(false);
  await query(s.udpPort, "periodic.example");
  const deadline = Date.now() + 4000;
  while (!existsSync(file) && Date.now() < deadline) await sleep(50);
  const entries = decodeDump(readFileSync(file), performance.now(), Date.now());
  expect(entries.map((e) => e.qname)).toEqual(["periodic.example"]);
});

test("dumps are written atomically: a reader never sees a partial file and no temp files are left", async () => {
  const d = dir();
  const file = join(d, "atomic.dump");
  const cache = new CacheExecutor(
    {
      tag: "atomic",
      size: 2000,
      shortCircuit: false,
      ecsInKey: false,
      policy: { maxPositiveTtl: null, minPositiveTtl: 0, cacheNegative: true, maxNegativeTtl: 300, negativeTtlWithoutSoa: 60, lazyMs: 0 },
      dumpFile: file,
      dumpIntervalMs: 600_000,
    },
    new MetricsHub({ processMetrics: false }),
    silentLogger(),
  );
  const next = localAnswer();
  for (let i = 0; i < 2000; i++) run(cache, queryContext(`name-number-${i}.atomic.example`), next);
  let reads = 0;
  let bad = 0;
  let writing = true;
  const reader = (async () => {
    while (writing) {
      if (existsSync(file)) {
        try {
          if (decodeDump(readFileSync(file), performance.now(), Date.now()).length !== 2000) bad++;
        } catch {
          bad++;
        }
        reads++;
      }
      await new Promise((res) => setImmediate(res));
    }
  })();
  for (let i = 0; i < 10; i++) await cache.persist();
  writing = false;
  await reader;
  await cache.destroy();
  expect(reads).toBeGreaterThan(0);
  expect(bad).toBe(0);
  expect(readdirSync(d)).toEqual(["atomic.dump"]);
});
