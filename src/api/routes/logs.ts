// Logs: GET /api/logs (the in-memory tail as JSON) and GET /api/logs/stream (SSE: replay, then
// live entries from the bus in shared batches, heartbeats, Last-Event-ID resume, bounded per-client queue).

import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaValidationError, HookHandlerDoneFunction } from "fastify";
import type { ApiHost } from "../host.js";
import { levelRank, type LogLevelName } from "../../observability/log-ring.js";
import { ApiError, errorSchema } from "../errors.js";
import { LogFeed, QUEUE_LIMIT, logFrame, replayRecords } from "../log-feed.js";
import { BATCH_MS } from "../turns.js";
import { DEFAULT_SSE_HEARTBEAT_MS } from "../../config/heartbeat.js";
import { logsSchema } from "../schemas.js";
import type { RouteContext } from "../server.js";
import { EventStreams, lastEventId, requireEventStream } from "../sse.js";
import type { StreamStats } from "../sse-client.js";

/** Values `level` accepts (case-insensitive); `warning` is an alias of `warn`. */
const LEVEL_VALUES = ["trace", "debug", "info", "warn", "warning", "error"] as const;
type LevelQuery = (typeof LEVEL_VALUES)[number];

const levelParam = {
  type: "string",
  enum: LEVEL_VALUES,
  description: "Minimum level (case-insensitive): trace, debug, info, warn (or warning), error",
} as const;

const logsQuery = {
  type: "object",
  properties: {
    limit: { type: "integer", minimum: 1, maximum: 1000, default: 200, description: "How many of the newest matching entries to return" },
    level: { ...levelParam, default: "trace" },
  },
} as const;

const streamQuery = {
  type: "object",
  properties: {
    tail: { type: "integer", minimum: 0, maximum: 500, default: 0, description: "Entries replayed on connect (ignored when a usable Last-Event-ID header is sent)" },
    level: { ...levelParam, default: "trace" },
  },
} as const;

const STREAM_DESCRIPTION =
  "Server-Sent Events. Frames: `event: log` with `id: <entry id>` and the entry as JSON data; `event: dropped` with " +
  `data {"dropped": n} when this client fell more than ${QUEUE_LIMIT} entries behind and the oldest queued ones were ` +
  `discarded; a \`: heartbeat\` comment right after the replay and every ${DEFAULT_SSE_HEARTBEAT_MS / 1000} s (api.http.sse_heartbeat). Live entries come in ` +
  `batches at most every ${BATCH_MS} ms. Send Last-Event-ID on reconnect to receive the entries after that id still held in memory.`;

/** Open log streams per app, for tests. */
const openStreams = new WeakMap<ApiHost, EventStreams>();

/** One record per open log stream of this app. */
export function logStreamStats(host: ApiHost): StreamStats[] {
  return openStreams.get(host)?.stats() ?? [];
}

function minLevel(level: LevelQuery): LogLevelName {
  return level === "warning" ? "warn" : level;
}

/** `level=WARN` is accepted: values are lower-cased before the schema checks them. */
function lowerCaseLevel(req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const query = req.query as Record<string, unknown>;
  if (typeof query.level === "string") query.level = query.level.toLowerCase();
  done();
}

/** A 400 naming the parameter, the rule it broke and what was sent. */
function queryError(req: FastifyRequest, problems: FastifySchemaValidationError[]): ApiError {
  const first = problems[0];
  const name = first?.instancePath.replace(/^\//, "") ?? "";
  // ajv's enum message does not list the values; the others ("must be <= 1000") already say why.
  const allowed = first?.keyword === "enum" ? (first.params as { allowedValues?: unknown[] }).allowedValues : undefined;
  const why = allowed ? `must be one of ${allowed.join(", ")}` : (first?.message ?? "is invalid");
  const sent = (req.query as Record<string, unknown>)[name];
  const shown = typeof sent === "string" || typeof sent === "number" ? ` (got ${JSON.stringify(String(sent).slice(0, 40))})` : "";
  return new ApiError("invalid_query", `querystring.${name || "?"} ${why}${shown}`);
}

function rejectInvalid(req: FastifyRequest): void {
  if (req.validationError) throw queryError(req, req.validationError.validation as FastifySchemaValidationError[]);
}

export function registerLogRoutes(api: FastifyInstance, { host }: RouteContext): void {
  const streams = new EventStreams(api, () => host.sseHeartbeatMs());
  openStreams.set(host, streams);
  const feed = new LogFeed(host.bus);

  api.get(
    "/api/logs",
    {
      attachValidation: true,
      preValidation: lowerCaseLevel,
      schema: { role: "viewer", summary: "Newest log entries from memory, oldest first", tags: ["observability"], querystring: logsQuery, response: { 200: logsSchema, 400: errorSchema } },
    },
    (req) => {
      rejectInvalid(req);
      const { limit, level } = req.query as { limit: number; level: LevelQuery };
      const entries = host.logRing.tail(limit, minLevel(level));
      return { ok: true, total: entries.length, entries };
    },
  );

  api.get(
    "/api/logs/stream",
    {
      exposeHeadRoute: false,
      attachValidation: true,
      preValidation: lowerCaseLevel,
      schema: {
        role: "viewer",
        summary: "Live log entries (Server-Sent Events)",
        description: STREAM_DESCRIPTION,
        tags: ["observability"],
        querystring: streamQuery,
        response: { 200: { type: "string", description: "text/event-stream" }, 400: errorSchema, 406: errorSchema },
      },
    },
    (req, reply) => {
      rejectInvalid(req);
      requireEventStream(req);
      const { tail, level } = req.query as { tail: number; level: LevelQuery };
      const rank = levelRank(minLevel(level));
      // The replay is read and the client subscribed in one synchronous step, so no entry falls between them or comes twice.
      const replay = replayRecords(host.logRing, lastEventId(req), tail, rank).map((r) => logFrame(r.entry()));
      // A log stream holds fewer frames than a plugin stream and waits for 'drain' as soon as write() says so.
      streams.start(req, reply, (sink) => feed.add(sink, rank), { replay, capacity: QUEUE_LIMIT, socketBytes: 0 });
    },
  );
}
