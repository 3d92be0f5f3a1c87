// Server-Sent Events: the one way the API's streams (GET /api/logs/stream, /api/actors/stream and
// plugin routes declared `stream: true`, src/registry/control.ts) are served. The Accept check
// (406 not_acceptable), the client's Last-Event-ID, the response head, a heartbeat at once and every
// api.http.sse_heartbeat, the client's bounded queue and the shared broadcaster (./sse-client.ts),
// release when the client goes or the source ends, and the end of every open stream when the API
// closes (shutdown, or a restart of the listener).

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { EventSink, OpenStream } from "../registry/control.js";
import { ApiError } from "./errors.js";
import { SOCKET_BYTES, STREAM_QUEUE, SseClient, sseBroadcast, type SseBroadcast, type StreamStats } from "./sse-client.js";

const HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" } as const;

/** SSE unless the client only accepts other types (curl and fetch send `*\/*`). */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(",").some((part) => {
    const [type = "", ...params] = part.trim().toLowerCase().split(";");
    const refused = params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
    return !refused && (type.trim() === "text/event-stream" || type.trim() === "text/*" || type.trim() === "*/*");
  });
}

/** Throws 406 not_acceptable when the client does not take an event stream; call it before any work. */
export function requireEventStream(req: FastifyRequest): void {
  if (!acceptsEventStream(req.headers.accept)) throw new ApiError("not_acceptable", "this route only produces text/event-stream");
}

/** The client's Last-Event-ID header (it reconnects), or null. */
export function lastEventId(req: FastifyRequest): string | null {
  const id = req.headers["last-event-id"];
  return typeof id === "string" && id !== "" ? id : null;
}

export interface StreamOptions {
  /** Frames written as soon as the stream opens, before its first heartbeat (a replay the client asked for). */
  replay?: readonly string[];
  /** Frames the client may hold while it reads slowly (default STREAM_QUEUE). */
  capacity?: number;
  /** User-space bytes the response may hold before the client waits for 'drain' (default SOCKET_BYTES). */
  socketBytes?: number;
}

/** The open streams of a group of routes: each one's client and how to release it. */
export class EventStreams {
  private readonly open = new Map<SseClient, () => void>();

  constructor(
    api: FastifyInstance,
    /** Read for each stream as it opens (api.http.sse_heartbeat follows reloads). */
    private readonly heartbeatMs: () => number,
    private readonly broadcast: SseBroadcast = sseBroadcast,
  ) {
    // The API closing ends what is open; forceCloseConnections would end the sockets anyway, but the
    // sources must let go of their clients too.
    api.addHook("onClose", (_instance, done) => {
      for (const release of [...this.open.values()]) release();
      done();
    });
  }

  /** What each open stream's client has done so far. */
  stats(): StreamStats[] {
    return [...this.open.keys()].map((c) => c.stats());
  }

  /**
   * Takes the reply over as an event stream and runs `source` on it until the client goes, the
   * source ends it, or the API closes. The source is opened in the same synchronous step as the
   * replay is written, so a source that reads what to replay just before misses nothing.
   */
  start(req: FastifyRequest, reply: FastifyReply, source: OpenStream, options: StreamOptions = {}): void {
    reply.hijack();
    const raw = reply.raw;
    // Headers set by hooks (CORS, nosniff) go out with the stream's own.
    for (const [name, value] of Object.entries({ ...HEADERS, ...reply.getHeaders() })) if (value !== undefined) raw.setHeader(name, value);
    raw.writeHead(200);
    const client = new SseClient(raw, this.broadcast.wake, options.capacity ?? STREAM_QUEUE, options.socketBytes ?? SOCKET_BYTES);
    this.broadcast.add(client);
    const timer = setInterval(() => client.heartbeat(), this.heartbeatMs());
    timer.unref();
    let close: (() => void) | null = null;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      clearInterval(timer);
      this.broadcast.remove(client);
      this.open.delete(client);
      close?.();
      client.close();
      raw.end();
    };
    this.open.set(client, release);
    raw.on("close", release);
    if (options.replay && options.replay.length > 0) {
      client.add(options.replay);
      client.turn();
    }
    client.heartbeat();
    const sink: EventSink = {
      send: (frames) => {
        if (frames.length === 0 || released) return;
        client.add(frames);
        this.broadcast.wake();
      },
      end: () => {
        // What the source sent before it went is written (as far as the socket takes it) before the end.
        if (!released) client.turn();
        release();
      },
    };
    try {
      close = source(sink, lastEventId(req));
    } catch (err) {
      release();
      throw err;
    }
    // The client may already be gone (then no close event will come), or the source ended at once.
    if (released) close();
    else if (raw.destroyed || !raw.socket || raw.socket.destroyed) release();
  }
}
