// The recorder's routes under /api/plugins/<tag>/: records (page, one, delete), the stats and the
// live stream. Reads are admitted by the recorder:<tag> actor (RECORDS.READ: refused while the
// reader processes' queue is full) and answered by reader processes as JSON text; the delete goes
// through the actor (one at a time, only with a running writer).

import { RefusedError, ActorGoneError, jsonReply, RouteError, sseReply, type PluginRoute, type RoutePlugin } from "../../../registry/control.js";
import type { QueryRecorder } from "./executor.js";
import { parseFilter, type PluginKind, type ReadRequest, type TopClientsBy } from "./filters.js";
import { HOUR_MS, MINUTE_MS } from "./rollups.js";
import { latencySchema, pluginStatsSchema, recordAnswerSchema, recordPageSchema, recordsClearedSchema, shareRowsSchema, timeseriesSchema, topClientsSchema } from "./schemas.js";

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 500;
export const DEFAULT_TOP = 20;
export const DEFAULT_BUCKETS = 60;
export const MAX_BUCKETS = 720;

const filterProps = {
  since_ms: { type: "integer", minimum: 0, description: "Records created at or after this Unix ms" },
  until_ms: { type: "integer", minimum: 0, description: "Records created at or before this Unix ms" },
  qname: { type: "string", maxLength: 256, description: "Case-insensitive substring of a question name" },
  client_ip: { type: "string", maxLength: 64, description: "Case-insensitive substring of the client address" },
  qtype: { type: "string", maxLength: 16, description: "Question type: mnemonic (A, AAAA), TYPEnnn or a number" },
  rcode: { type: "string", maxLength: 16, description: "Response code (NOERROR, NXDOMAIN, RCODEnnn), or _ERROR / _NO_RESPONSE" },
  status: { type: "string", maxLength: 16, description: "all (default), error, has_response, no_response" },
  matcher_tag: { type: "string", maxLength: 256, description: "Only records in which this matcher matched" },
  instance: { type: "string", maxLength: 253, description: "Only records of this Sluice instance (cluster.instance, else the host name)" },
  client_name: { type: "string", maxLength: 63, description: "Only records of the client of this name (exact, as the clients provider named it)" },
  group: { type: "string", maxLength: 63, description: "Only records of clients in this group (exact name)" },
} as const;

const query = (extra: Record<string, object> = {}): object => ({ type: "object", properties: { ...filterProps, ...extra } });

/** A refusal by the actor (writer down, readers closing or full), or an admitted read that failed. */
const READ_ERRORS = ["query_recorder_unavailable", "query_recorder_read_failed"];


/** Admitted by the actor (a refusal names its guard), then read in a reader process. */
async function read(plugin: RoutePlugin<QueryRecorder>, request: ReadRequest): Promise<object> {
  await plugin.concern.ask({ type: "RECORDS.READ" });
  return jsonReply(await plugin.view.read(request));
}

function stat(path: string, summary: string, extra: Record<string, object>, response: object, build: (q: Record<string, unknown>) => ReadRequest, description?: string): PluginRoute<QueryRecorder> {
  return {
    method: "GET",
    role: "viewer",
    path: `stats/${path}`,
    summary,
    ...(description ? { description } : {}),
    errors: READ_ERRORS,
    schema: { querystring: query(extra), response: { 200: response } },
    handle: (req, plugin) => read(plugin, build(req.query)),
  };
}

const topLimit = { limit: { type: "integer", minimum: 1, default: DEFAULT_TOP, description: "Rows returned (no upper cap; larger costs more)" } };

export const routes: PluginRoute<QueryRecorder>[] = [
  {
    method: "GET",
    role: "viewer",
    path: "records",
    summary: "A page of records, newest first, without steps",
    description: "Continue with `cursor` = the previous page's `next_cursor` (`<created_at_ms>:<id>`, strictly after that row); it is null on the last page.",
    errors: READ_ERRORS,
    schema: {
      querystring: query({
        limit: { type: "integer", minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE },
        cursor: { type: "string", pattern: "^[0-9]{1,15}:[0-9]{1,15}$", description: "next_cursor of the previous page" },
      }),
      response: { 200: recordPageSchema },
    },
    handle(req, plugin) {
      const q = req.query as { limit: number; cursor?: string };
      const [t, id] = (q.cursor ?? "").split(":").map(Number);
      return read(plugin, { op: "records", filter: parseFilter(req.query), cursor: q.cursor ? { createdAtMs: t, id } : null, limit: q.limit });
    },
  },
  {
    method: "GET",
    role: "viewer",
    path: "records/:id",
    summary: "One record with its execution path",
    errors: ["invalid_record_id", "record_not_found", ...READ_ERRORS],
    schema: {
      params: { type: "object", required: ["id"], properties: { id: { type: "string", maxLength: 64 } } },
      response: { 200: recordAnswerSchema },
    },
    handle(req, plugin) {
      const text = req.params.id ?? "";
      if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new RouteError("invalid_record_id", `'${text.slice(0, 40)}' is not a record id (a positive integer)`);
      return read(plugin, { op: "record", id: Number(text) });
    },
  },
  {
    method: "DELETE",
    role: "admin",
    path: "records",
    audit: () => "delete every record",
    summary: "Delete every record (current schema generation) after committing the queue",
    description: "Older schema generations in the same file and other recorders are not touched. The stream's replay tail is emptied too.",
    errors: ["query_recorder_busy", "query_recorder_unavailable", "query_recorder_clear_failed"],
    schema: { response: { 200: recordsClearedSchema } },
    async handle(_req, plugin) {
      const concern = plugin.concern;
      try {
        return { ok: true, cleared_records: (await concern.ask({ type: "RECORDS.CLEAR" })) as number };
      } catch (err) {
        if (err instanceof RefusedError || err instanceof ActorGoneError) throw err;
        // Admitted, then failed (PostgreSQL unreachable, the writer stopped before it finished): not a refusal.
        throw new RouteError("query_recorder_clear_failed", `the records could not be deleted: ${(err as Error).message}`);
      }
    },
  },
  stat(
    "plugins",
    "Per plugin: checked, matched, executed, and the records that reached it",
    { kind: { type: "string", enum: ["matcher", "executor", "builtin", "all"], default: "all" } },
    pluginStatsSchema,
    (q) => ({ op: "stats", stat: "plugins", filter: parseFilter(q), kind: q.kind as PluginKind }),
  ),
  stat(
    "top_clients",
    "Clients with the most records",
    { ...topLimit, by: { type: "string", enum: ["ip", "name"], default: "ip", description: "ip: one row per address; name: one row per client name over all its addresses (clients without a name: per address)" } },
    topClientsSchema,
    (q) => ({ op: "stats", stat: "top_clients", filter: parseFilter(q), limit: q.limit as number, by: q.by as TopClientsBy }),
    "`client_name` is the name the client had at the row's newest record (null when it had none); `client_ip` is the address of that record (by=ip: the row's address).",
  ),
  stat("top_qnames", "Question names with the most records (lower case, absolute)", topLimit, shareRowsSchema, (q) => ({ op: "stats", stat: "top_qnames", filter: parseFilter(q), limit: q.limit as number })),
  stat("qtype", "Records per question type (of the first question)", {}, shareRowsSchema, (q) => ({ op: "stats", stat: "qtype", filter: parseFilter(q) })),
  stat("rcode", "Records per response code; _ERROR (the pipeline failed) and _NO_RESPONSE", {}, shareRowsSchema, (q) => ({ op: "stats", stat: "rcode", filter: parseFilter(q) })),
  stat(
    "latency",
    "Latency summary, percentiles, histogram and the slowest names",
    { slow_limit: { type: "integer", minimum: 1, description: "Rows of slow_top (default 20)" }, limit: { type: "integer", minimum: 1, description: "Same as slow_limit" } },
    latencySchema,
    (q) => ({ op: "stats", stat: "latency", filter: parseFilter(q), slowLimit: (q.slow_limit ?? q.limit ?? DEFAULT_TOP) as number }),
    "Percentiles are nearest-rank over latencies kept to three significant digits (exact below 1 ms).",
  ),
  stat(
    "timeseries",
    "Records per minute or hour: totals, errors, no-responses, average and p95 latency",
    {
      bucket: { type: "string", enum: ["minute", "hour"], default: "minute" },
      buckets: { type: "integer", minimum: 1, maximum: MAX_BUCKETS, default: DEFAULT_BUCKETS },
    },
    timeseriesSchema,
    (q) => ({ op: "stats", stat: "timeseries", filter: parseFilter(q), bucketMs: q.bucket === "hour" ? HOUR_MS : MINUTE_MS, buckets: q.buckets as number, nowMs: Date.now() }),
    "`buckets` points, oldest first, ending with the one that holds until_ms (default now); empty ones are zeros.",
  ),
  {
    method: "GET",
    role: "viewer",
    path: "stream",
    summary: "New records as Server-Sent Events",
    description:
      "Frames: `event: record` with `id: <record id>` and the record detail (`{record, steps}`) as data, for the newest `tail` records held in memory (at most memory_tail) and then each record as it is committed; `: heartbeat` at once and every 15 s; `event: dropped` with `{\"dropped\": n}` when this client fell behind and records were skipped. Send Last-Event-ID on reconnect to get the records after it that are still held.",
    stream: true,
    errors: ["not_acceptable"],
    schema: { querystring: { type: "object", properties: { tail: { type: "integer", minimum: 0, maximum: 100_000, default: 0, description: "Records replayed on connect (capped at memory_tail)" } } } },
    handle(req, plugin) {
      const tail = (req.query as { tail: number }).tail;
      return sseReply((sink, lastEventId) => plugin.view.openStream(sink, tail, lastEventId));
    },
  },
];
