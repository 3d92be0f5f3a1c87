// What the primary and its data-plane workers tell each other over the cluster channel (Node's IPC,
// structured clone). Plugin messages (the recorder's batches) carry their plugin's tag as `key`;
// these are the process's own, with key "". Runtime changes travel in the shape the Redis cluster
// channel uses (src/cluster/cluster.ts SharedChange), and are replayed the same way.

import type { SharedChange } from "../../cluster/cluster.js";
import type { MetricsSnapshot } from "../../observability/metrics.js";
import type { ChannelMessage, ServerAddress } from "../../registry/process-role.js";

/** The worker serves (after its start and after each reload): where its servers listen. */
export type ReadyMessage = ChannelMessage & { t: "ready"; pid: number; generation: number; servers: Record<string, ServerAddress> };
/** A worker's `reload` executor ran: the primary reloads (then tells every worker to). */
export type ReloadRequest = ChannelMessage & { t: "reload?" };
/** The worker could not start; it exits next. */
export type FailedMessage = ChannelMessage & { t: "failed"; error: string };
/** The answer (process-role.ts ANSWER) to a MetricsRequest. */
export type MetricsReply = ChannelMessage & { t: "answer"; id: number; snapshot: MetricsSnapshot };

/** Primary → worker. */
export type ChangeMessage = ChannelMessage & { t: "change"; change: SharedChange };
export type ReloadMessage = ChannelMessage & { t: "reload" };
export type MetricsRequest = ChannelMessage & { t: "metrics?"; id: number };
export type StopMessage = ChannelMessage & { t: "stop" };

/** What a worker is started with (the environment variable WORKER_ENV, JSON). */
export interface WorkerStart {
  index: number;
  configPath: string;
  baseDir: string;
  logLevel: string | null;
}

export const WORKER_ENV = "SLUICE_WORKER";

export function isReady(m: ChannelMessage): m is ReadyMessage {
  return m.t === "ready" && typeof m.pid === "number" && typeof m.servers === "object" && m.servers !== null;
}
