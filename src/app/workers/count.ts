// `workers: <n|auto>`: how many data-plane processes a configuration asks for.

import { availableParallelism } from "node:os";
import { MAX_WORKERS } from "../../config/schema.js";

/** `auto`: one per core the process may use, at most MAX_WORKERS; a count as written. */
export function workerCount(setting: number | "auto", cores = availableParallelism()): number {
  if (setting === "auto") return Math.max(1, Math.min(cores, MAX_WORKERS));
  return Math.max(1, Math.min(Math.floor(setting), MAX_WORKERS));
}
