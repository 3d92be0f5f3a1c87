// A data-plane worker's recorder hands its batches to the primary's recorder of the same tag
// (src/app/workers/), whose writer commits them: the same batch message the writer thread takes,
// sent over the cluster channel at each flush (never a message per query). Each batch carries the
// worker's whole tag, name and group-set tables (a few dozen strings), so the one writer can take
// batches from any number of workers. A batch counts against the worker's queue until the primary
// says it took it (or dropped it: its own queue was full), so a slow primary costs records, counted,
// never a wait on the DNS thread.

import { randomUUID } from "node:crypto";
import type { ProcessChannel } from "../../../registry/process-role.js";
import type { WriterRequest } from "./protocol.js";

export type BatchRequest = Extract<WriterRequest, { t: "batch" }>;

/** The primary's answer to a batch: how many records it covered and how many of them were dropped there. */
export interface BatchAck {
  count: number;
  lost: number;
}

export const RECORDS_MESSAGE = "records";
export const RECORDS_ACK = "records.ack";

export class PrimaryLink {
  gone = false;
  /** Nothing to open: the primary's writer is the one. */
  readonly ready = Promise.resolve({ records: 0, dbBytes: 0 });
  private readonly unlisten: () => void;
  /** Where the primary answers: this link's own (a reload's next recorder of the same tag has another). */
  private readonly ackKey: string;

  constructor(
    private readonly channel: ProcessChannel,
    private readonly tag: string,
    acked: (ack: BatchAck) => void,
  ) {
    this.ackKey = `${tag}#${randomUUID()}`;
    this.unlisten = channel.listen(RECORDS_ACK, this.ackKey, (m) => {
      const count = typeof m.count === "number" ? m.count : 0;
      const lost = typeof m.lost === "number" ? m.lost : 0;
      acked({ count, lost });
    });
  }

  /** False when the channel to the primary is closed: the batch is lost (the worker counts it). */
  post(m: WriterRequest): boolean {
    if (this.gone || m.t !== "batch") return true;
    return this.channel.send({ t: RECORDS_MESSAGE, key: this.tag, ackKey: this.ackKey, batch: m });
  }

  /** Retention and clearing are the primary's (its writer owns the store). */
  request(): Promise<number> {
    return Promise.resolve(0);
  }

  close(): Promise<void> {
    this.gone = true;
    this.unlisten();
    return Promise.resolve();
  }
}

/** A batch as it arrives from a worker, checked before it reaches the writer. */
export function batchFrom(value: unknown): BatchRequest | null {
  if (typeof value !== "object" || value === null) return null;
  const b = value as Record<string, unknown>;
  const lists = [b.strings, b.clientNames, b.groupSets, b.ips].every(Array.isArray);
  const numbers = [b.stringsFrom, b.clientNamesFrom, b.groupSetsFrom, b.count].every((n) => typeof n === "number");
  if (b.t !== "batch" || !lists || !numbers || !(b.data instanceof ArrayBuffer)) return null;
  // Every table from its first entry: the writer's tables become this worker's.
  if (b.stringsFrom !== 0 || b.clientNamesFrom !== 0 || b.groupSetsFrom !== 0) return null;
  return b as unknown as BatchRequest;
}
