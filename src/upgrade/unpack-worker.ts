// Worker-thread entry of the unpack (unpack.ts starts one per artefact): gunzip and untar run here,
// bounded in size and ratio (extract.ts), so the thread that answers DNS never inflates a byte.

import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";
import { extractBounded, type ExtractJob, type ExtractOutcome } from "./extract.js";

/** Nice value of the unpack thread: DNS on the main thread always goes first. */
const UNPACK_NICE = 10;

const port = parentPort;
const job = workerData as { role?: string; job?: ExtractJob } | null;
// Only as the unpack's worker: imported anywhere else, this module does nothing.
if (port && job?.role === "sluice-unpack" && job.job) {
  try {
    setPriority(UNPACK_NICE);
  } catch {
    // Not permitted here: the worker then competes with DNS at equal priority.
  }
  extractBounded(job.job).then(
    (outcome) => port.postMessage(outcome),
    (err: unknown) => port.postMessage({ ok: false, error: `the artefact cannot be unpacked: ${err instanceof Error ? err.message : String(err)}` } satisfies ExtractOutcome),
  );
}
