// The cache's control plane: a `cache:<tag>` actor (machines/cache.machine.ts) that loads dump_file
// at start, runs flush, delete, dump and load one at a time, sweeps, and writes dump_file
// periodically and at stop; and the routes under /api/plugins/<tag>/. Entry listing reads the cache
// directly; everything that changes it goes through the actor. With data-plane workers the primary's
// cache holds nothing: its routes ask the workers' (workers.ts).

import { fromPromise } from "xstate";
import { cacheMachine, type CacheInput, type CacheOperation, type PersistDone } from "../../../../machines/cache.machine.js";
import { bytesReply, type PluginControl, type PluginRoute, type RoutePlugin } from "../../../registry/control.js";
import { CURSOR_MAX_LENGTH, DEFAULT_PAGE, MAX_PAGE } from "./api.js";
import { CacheApiError } from "./errors.js";
import { SWEEP_INTERVAL_MS, type CacheExecutor } from "./executor.js";
import { cacheDeletedSchema, cacheEntriesSchema, cacheFlushedSchema, cacheLoadedSchema } from "./schemas.js";

/**
 * load_dump's own body limit (the API's body_bytes does not apply): a dump of a large cache is big.
 * The body is decoded as it arrives and only `size` entries are kept, so memory does not follow it.
 */
export const LOAD_DUMP_BODY_LIMIT = 256 * 1024 * 1024;

async function operate(cache: CacheExecutor, op: CacheOperation): Promise<unknown> {
  switch (op.type) {
    case "CACHE.FLUSH": {
      const n = cache.flush();
      if (op.from_peer !== true) await cache.clearShared();
      return n;
    }
    // With data-plane workers (in the primary) these ask the workers' caches (workers.ts).
    case "CACHE.DELETE":
      if (!(cache.workers ? await cache.workers.deleteEntry(op.id) : cache.deleteEntry(op.id))) throw new CacheApiError("cache_entry_not_found", "no such entry in this cache (it may have expired or been evicted)");
      return true;
    case "CACHE.DUMP":
      return cache.workers ? cache.workers.dump() : cache.dump();
    case "CACHE.LOAD":
      return cache.workers ? cache.workers.load(op.source) : cache.load(op.source);
  }
}

/** An operation of the cache actor: the cache's own errors keep their codes; a refusal or a gone actor goes to the guard table. */
const ask = (plugin: RoutePlugin<CacheExecutor>, event: CacheOperation): Promise<unknown> => plugin.concern.ask(event);

const flush: PluginRoute<CacheExecutor> = {
  // POST only: a GET that empties the cache could be fired by a link, a redirect or a prefetch.
  method: "POST",
  role: "operator",
  path: "flush",
  audit: () => "flush every entry",
  summary: "Remove every entry",
  changesState: true,
  errors: ["cache_busy"],
  schema: { response: { 200: cacheFlushedSchema } },
  async handle(_req, plugin) {
    return { ok: true, cleared_entries: (await ask(plugin, { type: "CACHE.FLUSH" })) as number };
  },
};

const routes: PluginRoute<CacheExecutor>[] = [
  {
    method: "GET",
    role: "viewer",
    path: "entries",
    summary: "A page of live entries, newest first",
    description: "Cursor paging visits every entry that lives through it exactly once (entries stored after the first page are not visited).",
    schema: {
      querystring: {
        type: "object",
        additionalProperties: false,
        properties: {
          limit: { type: "integer", minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE },
          cursor: { type: "string", maxLength: CURSOR_MAX_LENGTH, description: "next_cursor of the previous page" },
          qname: { type: "string", maxLength: 255, description: "Case-insensitive substring of the question name" },
        },
      },
      response: { 200: cacheEntriesSchema },
    },
    async handle(req, plugin) {
      const q = req.query as { limit: number; cursor?: string; qname?: string };
      const query = { limit: q.limit, cursor: q.cursor ?? null, qname: q.qname };
      const cache = plugin.view;
      return { ok: true, ...(cache.workers ? await cache.workers.entries(query) : cache.entries(query)) };
    },
  },
  {
    method: "DELETE",
    role: "operator",
    path: "entries/:id",
    audit: (req) => `delete entry ${req.params.id ?? ""}`,
    summary: "Remove one entry",
    errors: ["cache_entry_not_found", "invalid_cache_entry_id", "cache_busy"],
    schema: {
      params: { type: "object", required: ["id"], properties: { id: { type: "string", maxLength: 4096 } } },
      response: { 200: cacheDeletedSchema },
    },
    async handle(req, plugin) {
      await ask(plugin, { type: "CACHE.DELETE", id: req.params.id ?? "" });
      return { ok: true, deleted: true };
    },
  },
  flush,
  {
    method: "GET",
    role: "viewer",
    path: "dump",
    summary: "Download the live entries as a dump file (application/octet-stream)",
    errors: ["cache_busy"],
    async handle(_req, plugin) {
      return bytesReply((await ask(plugin, { type: "CACHE.DUMP" })) as Buffer, "application/octet-stream", `${plugin.tag}.dump`);
    },
  },
  {
    method: "POST",
    role: "operator",
    path: "load_dump",
    audit: () => "load a dump",
    summary: "Replace the entries with those of a dump (raw bytes, up to 256 MiB); undecodable data changes nothing",
    description: "The dump is decoded as it arrives, in slices that leave DNS served, and only the `size` most recently used live entries are kept.",
    body: "stream",
    bodyLimit: LOAD_DUMP_BODY_LIMIT,
    errors: ["invalid_cache_dump", "cache_busy", "body_too_large"],
    schema: { response: { 200: cacheLoadedSchema } },
    async handle(req, plugin) {
      const source = (req.body ?? []) as AsyncIterable<Uint8Array>;
      return { ok: true, loaded_entries: (await ask(plugin, { type: "CACHE.LOAD", source })) as number };
    },
  },
];

export const cacheControl: PluginControl<CacheExecutor> = {
  concern: (cache, env) => ({
    id: `cache:${env.tag}`,
    logic: cacheMachine.provide({
      actors: {
        loadDump: fromPromise(({ signal }) => cache.loadDumpFile(signal)),
        loadShared: fromPromise(({ signal }) => cache.loadFromTier(signal)),
        operate: fromPromise(({ input }: { input: CacheOperation }) => operate(cache, input)),
        persist: fromPromise(async (): Promise<PersistDone> => ({ entries: await cache.persist(), at_ms: Date.now() })),
      },
      guards: { cacheChanged: () => cache.unsavedChanges > 0 },
      actions: { sweep: () => void cache.sweep() },
    }),
    input: { tag: env.tag, persistent: cache.persistent, persistIntervalMs: cache.dumpIntervalMs, sweepIntervalMs: SWEEP_INTERVAL_MS } satisfies CacheInput,
    // The first query after a start or reload already sees the dump's entries.
    startup: cache.persistent,
  }),
  routes,
  // The member that was asked has cleared the shared Redis level; the others clear their own memory.
  shared: { events: ["CACHE.FLUSH"], replay: () => ({ type: "CACHE.FLUSH", from_peer: true }) },
};
