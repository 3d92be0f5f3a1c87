// The recorder's metrics (label plugin_tag): what was written and dropped, how long a batch took,
// and how big the database is. The DNS thread only touches `dropped` (and only when it drops).

import type { Cell, MetricsHub, Observer } from "../../../observability/metrics.js";

export interface RecorderMetrics {
  written: Cell;
  dropped: Cell;
  batch: Observer;
  records: Cell;
  dbBytes: Cell;
  queue: Cell;
}

/** Seconds; a batch of a few hundred records commits in milliseconds, a trim or a busy disk takes longer. */
const BATCH_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5] as const;

export function recorderMetrics(m: MetricsHub, tag: string): RecorderMetrics {
  const labels = { plugin_tag: tag };
  const names = ["plugin_tag"];
  return {
    written: m.counter("query_recorder_records_written_total", "query_recorder: records committed to the database", names)(labels),
    dropped: m.counter("query_recorder_dropped_total", "query_recorder: records not stored (queue full, writer down, or a failed transaction)", names)(labels),
    batch: m.histogram("query_recorder_batch_duration_seconds", "query_recorder: time to write one transaction of batches, seconds", names, BATCH_BUCKETS)(labels),
    records: m.gauge("query_recorder_records", "query_recorder: records in the database (current schema generation)", names)(labels),
    dbBytes: m.gauge("query_recorder_database_bytes", "query_recorder: size of the database file and its write-ahead log, bytes", names)(labels),
    queue: m.gauge("query_recorder_queue_records", "query_recorder: records captured and not yet committed", names)(labels),
  };
}
