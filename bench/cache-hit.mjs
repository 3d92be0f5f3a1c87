// Micro-benchmark of the cache hit path: drives 200 000 hits through `execute` in-process.
// Run from the repository root after compiling: `npm run build && node bench/cache-hit.mjs`
// (or compile elsewhere and set SLUICE_DIST to that output directory).

import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const dist = resolve(process.env.SLUICE_DIST ?? "dist");
const load = (p) => import(pathToFileURL(join(dist, p)).href);

const { CacheExecutor } = await load("src/plugins/executors/cache/executor.js");
const { MetricsHub } = await load("src/observability/metrics.js");
const { silentLogger } = await load("src/observability/logger.js");
const { DnsContext } = await load("src/engine/context.js");
const { decodeMessage, encodeMessage, replyTo } = await load("src/dns/message.js");
const { decodeQuery } = await load("src/dns/query.js");
const { DnsResponse } = await load("src/dns/response.js");
const { addressRecord } = await load("src/dns/rdata.js");

const HITS = 200_000;
const NAMES = 64;

const cache = new CacheExecutor(
  {
    tag: "bench",
    size: 1024,
    shortCircuit: true,
    ecsInKey: false,
    policy: { maxPositiveTtl: null, minPositiveTtl: 0, cacheNegative: true, maxNegativeTtl: 300, negativeTtlWithoutSoa: 60, lazyMs: 0 },
    dumpFile: null,
    dumpIntervalMs: 600_000,
  },
  new MetricsHub({ processMetrics: false }),
  silentLogger(),
);

const queryWire = (name, id) =>
  encodeMessage({
    id,
    flags: 0x0100,
    questions: [{ name, type: 1, class: 1 }],
    answers: [],
    authorities: [],
    additionals: [],
    edns: { udpSize: 1232, extRcode: 0, version: 0, flags: 0, options: [] },
  });

const upstream = (ctx) => {
  const reply = replyTo(ctx.query, 0);
  reply.answers = [addressRecord(ctx.query.questions[0].name, new Uint8Array([192, 0, 2, 1]), 3600), addressRecord(ctx.query.questions[0].name, new Uint8Array([192, 0, 2, 2]), 3600)];
  ctx.response = DnsResponse.fromMessage(reply);
  return 0;
};

const wires = [];
for (let i = 0; i < NAMES; i++) {
  const w = queryWire(`host-${i}.Bench.Example.com`, i);
  wires.push(w);
  const ctx = new DnsContext(decodeMessage(w), w, "127.0.0.1", 0, "udp");
  cache.execute(ctx, upstream);
}

const contexts = wires.map((w) => new DnsContext(decodeMessage(w), w, "127.0.0.1", 0, "udp"));

function executeOnly(n) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const ctx = contexts[i & (NAMES - 1)];
    if (cache.execute(ctx, upstream) !== 1) throw new Error("expected a short-circuited hit");
  }
  return Number(process.hrtime.bigint() - started) / n;
}

function withContext(n) {
  const started = process.hrtime.bigint();
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const w = wires[i & (NAMES - 1)];
    // As the servers do: the query fast path, then a context that takes its name and question end.
    const q = decodeQuery(w);
    const ctx = new DnsContext(q.message, w, "127.0.0.1", 0, "udp", q.qname, q.questionEnd);
    cache.execute(ctx, upstream);
    bytes += ctx.response.toWire().length;
  }
  if (bytes === 0) throw new Error("no answers");
  return Number(process.hrtime.bigint() - started) / n;
}

// The machine may be busy: run several rounds and report the best and the median.
const ROUNDS = 7;
const summary = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return `best ${sorted[0].toFixed(0)} ns, median ${sorted[sorted.length >> 1].toFixed(0)} ns`;
};
executeOnly(HITS); // warm-up
withContext(HITS / 4);
const hits = [];
const full = [];
for (let r = 0; r < ROUNDS; r++) {
  hits.push(executeOnly(HITS));
  full.push(withContext(HITS));
}
console.log(`cache hit via execute (${HITS} hits x ${ROUNDS}): ${summary(hits)} per hit`);
console.log(`decode + DnsContext + execute + toWire (${HITS} x ${ROUNDS}): ${summary(full)} per query`);
