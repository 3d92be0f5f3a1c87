// Worker-thread entry that validates configuration text off the event loop serving DNS. The runner
// (validate-pool.ts) caps this thread's heap and time; this side answers one job at a time.

import { setPriority } from "node:os";
import { getHeapStatistics } from "node:v8";
import { parentPort, workerData } from "node:worker_threads";
import { runValidation, WORKER_READY, WORKER_ROLE, type ValidationOutcome, type WorkerReply, type WorkerRequest } from "../config/validation.js";
import { catalogOf } from "../plugins/catalog.js";
import type { BuildSelection } from "../registry/bundles.js";
import type { Catalog } from "../registry/catalog.js";

/** Nice value of the validation thread. */
const VALIDATION_NICE = 10;

const catalogs = new Map<string, Catalog>();

function catalogFor(build: BuildSelection): Catalog {
  const key = `${build.bundle}:${build.enabledFeatures.join(",")}`;
  let catalog = catalogs.get(key);
  if (!catalog) {
    catalog = catalogOf(build);
    catalogs.set(key, catalog);
  }
  return catalog;
}

const port = parentPort;
// Only as the runner's worker: imported anywhere else (a test worker thread), this module does nothing.
if (port && workerData === WORKER_ROLE) {
  // Below the DNS thread (Linux sets nice per thread): a hostile body being parsed competes for the
  // CPU only with what DNS leaves, and meets its time limit sooner on a busy host rather than slowing DNS.
  try {
    setPriority(VALIDATION_NICE);
  } catch {
    // Not permitted here: the worker then competes with DNS at equal priority.
  }
  port.on("message", (req: WorkerRequest) => {
    let outcome: ValidationOutcome;
    try {
      outcome = runValidation(req.job, catalogFor(req.build));
    } catch (err) {
      outcome = { ok: false, kind: "failed", message: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage({ id: req.id, outcome, heapBytes: getHeapStatistics().total_heap_size } satisfies WorkerReply);
  });
  port.postMessage(WORKER_READY);
}
