// Server-Sent Events shared by the API's streams: the Accept check, and the stream of a plugin route
// (src/registry/control.ts `stream: true`): headers, a heartbeat at once and every HEARTBEAT_MS, and
// per client a bounded queue (./log-stream.ts) so a slow reader skips frames instead of growing memory.

import type { FastifyReply } from "fastify";
import type { EventSink, OpenStream } from "../registry/control.js";
import { FrameBatch, HEARTBEAT_MS, LogStreamConnection } from "./log-stream.js";

/** SSE unless the client only accepts other types (curl and fetch send `*\/*`). */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(",").some((part) => {
    const [type = "", ...params] = part.trim().toLowerCase().split(";");
    const refused = params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
    return !refused && (type.trim() === "text/event-stream" || type.trim() === "text/*" || type.trim() === "*/*");
  });
}

/**
 * Frames a plugin stream's client may hold while its socket is backpressured: a few of the largest
 * batches a source sends at once (the recorder sends at most 2 048 records per commit).
 */
export const PLUGIN_STREAM_QUEUE = 8192;

/** Frames sent to many clients are joined into write-sized chunks once, whichever client writes them first. */
const batches = new WeakMap<readonly string[], FrameBatch>();

function batchOf(frames: readonly string[]): FrameBatch {
  let b = batches.get(frames);
  if (!b) {
    b = new FrameBatch(frames);
    batches.set(frames, b);
  }
  return b;
}

/**
 * Commits `reply` (a route registered with @fastify/sse in manual mode) as an event stream and runs
 * the plugin's stream on it until the client goes or `release` is called; returns `release`.
 */
export function startPluginStream(reply: FastifyReply, open: OpenStream, onRelease: () => void): () => void {
  reply.sse.keepAlive();
  reply.sse.sendHeaders();
  // A drained socket writes what the client holds; nothing else schedules it.
  const conn: LogStreamConnection = new LogStreamConnection(reply.raw, "trace", () => conn.send(null), PLUGIN_STREAM_QUEUE);
  conn.heartbeat();
  const timer = setInterval(() => conn.heartbeat(), HEARTBEAT_MS);
  timer.unref();
  let close: (() => void) | null = null;
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    clearInterval(timer);
    close?.();
    conn.close();
    onRelease();
  };
  reply.sse.onClose(release);
  const sink: EventSink = {
    send(frames) {
      if (frames.length > 0) conn.send(batchOf(frames));
    },
    end() {
      release();
      reply.raw.end();
    },
  };
  try {
    close = open(sink, reply.sse.lastEventId);
  } catch (err) {
    release();
    reply.raw.end();
    throw err;
  }
  // The client may already be gone (then no close event will come).
  if (!reply.sse.isConnected || reply.raw.destroyed || !reply.raw.socket || reply.raw.socket.destroyed) release();
  return release;
}
