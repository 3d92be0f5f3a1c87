// The recorder's metrics (label plugin_tag): what was written and dropped, how long a batch took,
// and how big the database is. The DNS thread only touches `dropped` (and only when it drops); the
// rest is copied from the writer's shared totals (progress.ts) at flushes and before each scrape.

import type { HistogramSeries } from "../../../observability/histogram.js";
import type { Cell, MetricsHub } from "../../../observability/metrics.js";
import { COMMIT_BUCKETS } from "./progress.js";

export interface RecorderMetrics {
  written: Cell;
  dropped: Cell;
  batch: HistogramSeries;
  records: Cell;
  dbBytes: Cell;
  queue: Cell;
}

export function recorderMetrics(m: MetricsHub, tag: string): RecorderMetrics {
  const labels = { plugin_tag: tag };
  const names = ["plugin_tag"];
  return {
    written: m.counter("query_recorder_records_written_total", "query_recorder: records committed to the database", names)(labels),
    dropped: m.counter("query_recorder_dropped_total", "query_recorder: records not stored (queue full, writer down, or a failed transaction)", names)(labels),
    batch: m.histogram("query_recorder_batch_duration_seconds", "query_recorder: time to write one transaction of batches, seconds", names, COMMIT_BUCKETS)(labels),
    records: m.gauge("query_recorder_records", "query_recorder: records in the database (current schema generation)", names)(labels),
    dbBytes: m.gauge("query_recorder_database_bytes", "query_recorder: size of the database file and its write-ahead log, bytes", names)(labels),
    queue: m.gauge("query_recorder_queue_records", "query_recorder: records captured and not yet committed", names)(labels),
  };
}
