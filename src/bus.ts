// The in-process event bus: what many parts listen to (SSE streams, status pages, tests).
// Only the control plane emits here; the DNS hot path never does.

import { EventEmitter } from "eventemitter3";
import type { StoredAuditEntry } from "./api/audit/store.js";
import type { LogRecord } from "./observability/log-ring.js";

export interface ActorTransition {
  /** systemId, or the path of a child actor (runtime:3/plugin:main). */
  id: string;
  /** active, done, error, stopped */
  status: string;
  state: unknown;
  /** The public part of the context, as /api/actors shows it. */
  context: Record<string, unknown>;
}

export interface BusEvents {
  /** A line just logged (parse it with `entry()` only if it is shown). */
  log: (record: LogRecord) => void;
  /** An actor changed state or context (the reload status is the app actor's context). */
  "actor.transition": (t: ActorTransition) => void;
  /** An entry of the audit trail, just written to its store (with its id). */
  audit: (entry: StoredAuditEntry) => void;
}

export class Bus extends EventEmitter<BusEvents> {}
