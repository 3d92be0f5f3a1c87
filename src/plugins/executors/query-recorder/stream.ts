// The record stream's clients on the DNS thread. Records are serialised once, in the writer, and
// only while someone listens; each committed batch arrives as one array of SSE frames, handed to
// every client by reference (O(1) each): the API layer (src/api/sse.ts) writes it later, in budgeted
// turns, joined into chunks once for all clients, queued per client up to a bound. A new client asks
// the writer for its replay (the newest `tail` records, or those after its Last-Event-ID); the
// writer answers in order with its commits, so the client gets the replay, then every later
// record, with no gap and nothing twice.

import type { EventSink } from "../../../registry/control.js";
import type { WriterRequest } from "./protocol.js";

interface Client {
  sink: EventSink;
  /** Waiting for its replay (live frames are not sent before it). */
  pending: boolean;
  tail: number;
  afterId: number | null;
}

export class RecordStreams {
  private readonly clients = new Map<number, Client>();
  private nextId = 0;

  /** `send` reaches the writer when there is one (requests made while there is none are repeated by `writerStarted`). */
  constructor(private readonly send: (m: WriterRequest) => void) {}

  get size(): number {
    return this.clients.size;
  }

  open(sink: EventSink, tail: number, lastEventId: string | null): () => void {
    const id = ++this.nextId;
    const last = lastEventId !== null && /^\d{1,15}$/.test(lastEventId.trim()) ? Number(lastEventId.trim()) : null;
    const client: Client = { sink, pending: true, tail, afterId: last };
    if (this.clients.size === 0) this.send({ t: "live", on: true });
    this.clients.set(id, client);
    this.send({ t: "replay", client: id, tail, afterId: last });
    return () => {
      if (!this.clients.delete(id)) return;
      if (this.clients.size === 0) this.send({ t: "live", on: false });
    };
  }

  replayed(clientId: number, frames: string[]): void {
    const c = this.clients.get(clientId);
    if (!c || !c.pending) return;
    c.pending = false;
    c.sink.send(frames);
  }

  committed(frames: readonly string[]): void {
    for (const c of this.clients.values()) if (!c.pending) c.sink.send(frames);
  }

  /** A new writer knows nothing of the clients: listen again, and replay for those still waiting. */
  writerStarted(): void {
    if (this.clients.size === 0) return;
    this.send({ t: "live", on: true });
    for (const [id, c] of this.clients) if (c.pending) this.send({ t: "replay", client: id, tail: c.tail, afterId: c.afterId });
  }

  /** Ends every client's response (the plugin is going away; clients reconnect to its successor). */
  endAll(): void {
    const all = [...this.clients.values()];
    this.clients.clear();
    for (const c of all) c.sink.end();
  }
}
