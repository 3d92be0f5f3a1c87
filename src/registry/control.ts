// What a plugin type may declare for its control plane: a concern actor (its machine, bound to the
// instance) and API routes served under /api/plugins/<tag>/. Framework-neutral: the API layer turns
// routes into fastify routes and maps error codes and refusing guards to HTTP statuses.

import type { ProcessRole } from "./process-role.js";
import type { Role } from "./roles.js";
import type { AnyActorLogic } from "xstate";
import type { Logger } from "pino";
import type { MetricsHub } from "../observability/metrics.js";
import type { MatcherModeCell } from "./matcher-mode.js";

export interface ConcernEnv {
  readonly tag: string;
  readonly log: Logger;
  readonly metrics: MetricsHub;
  /** The cell the data plane reads a declared matcher's runtime mode from. */
  readonly matcherMode: MatcherModeCell | null;
  /** The process's part (registry/process-role.ts): a worker's concern leaves files and shared work to the primary. */
  readonly role: ProcessRole["kind"];
  /**
   * `err` located at this plugin in the configuration and worded `plugin '<tag>' (<type>) <failed>:
   * <message>`, as a failed create is: what a concern's failed start-up fails the runtime with.
   */
  pluginError(err: unknown, failed: string): Error;
}

/**
 * A concern actor: a child of `plugin:<tag>` with this id, running `logic` with `input`. With
 * `startup`, the machine has start-up work and sends its parent CONCERN.STARTED or
 * CONCERN.START_FAILED (machines/concern.ts: reportStarted / reportStartFailed); the plugin, and so
 * the runtime, is ready only after it.
 */
export interface Concern {
  id: string;
  logic: AnyActorLogic;
  input?: unknown;
  startup?: boolean;
}

export type HttpMethod = "GET" | "POST" | "PUT" | "DELETE";

export interface RouteRequest {
  params: Record<string, string>;
  query: Record<string, unknown>;
  /**
   * Parsed JSON for `body: "json"` routes, the raw bytes for `body: "raw"` routes, and for
   * `body: "stream"` routes an AsyncIterable<Uint8Array> of the bytes as they arrive (bounded by
   * `bodyLimit`: past it, iterating throws a body_too_large RouteError).
   */
  body: unknown;
  /** Aborted when the client goes away (streams). */
  signal: AbortSignal;
}

const replyBrand = Symbol("sluice.route-reply");

/** Where a streaming route writes: complete SSE frames. One array may go to many clients; it is not changed. */
export interface EventSink {
  send(frames: readonly string[]): void;
  /** Ends this client's response (the source went away, e.g. a reload replaced the plugin; clients reconnect). */
  end(): void;
}

/**
 * Starts one client's stream once the response is committed as `text/event-stream`; returns what to
 * call when the client goes. `lastEventId` is the client's Last-Event-ID header (a reconnect).
 */
export type OpenStream = (sink: EventSink, lastEventId: string | null) => () => void;

/** A reply other than JSON (a handler's plain object return is the JSON body). */
export type RouteReply =
  | { readonly [replyBrand]: true; kind: "text"; body: string }
  | { readonly [replyBrand]: true; kind: "bytes"; body: Buffer; contentType: string; filename: string }
  /** A JSON body serialised already (off the event loop, by a worker). */
  | { readonly [replyBrand]: true; kind: "json"; body: string }
  /** Server-Sent Events; only from routes declared with `stream: true`. */
  | { readonly [replyBrand]: true; kind: "sse"; open: OpenStream };

export const textReply = (body: string): RouteReply => ({ [replyBrand]: true, kind: "text", body });
export const bytesReply = (body: Buffer, contentType: string, filename: string): RouteReply => ({ [replyBrand]: true, kind: "bytes", body, contentType, filename });
export const jsonReply = (body: string): RouteReply => ({ [replyBrand]: true, kind: "json", body });
export const sseReply = (open: OpenStream): RouteReply => ({ [replyBrand]: true, kind: "sse", open });
export const isReply = (v: unknown): v is RouteReply => typeof v === "object" && v !== null && replyBrand in v;

/** An answer's outcome arrives as the concern's `answer` emitted event. */
export interface ConcernHandle {
  readonly id: string;
  /** Status, state value and context of the concern actor now. */
  snapshot(): { status: string; value: unknown; context: unknown };
  /**
   * Sends `event` (a requestId is added) if the actor accepts it and resolves with the operation's
   * output. Rejects with RefusedError naming the guard that refused it, or with the operation's error.
   */
  ask(event: { type: string } & Record<string, unknown>): Promise<unknown>;
}

export interface RoutePlugin<I> {
  readonly tag: string;
  readonly type: string;
  /** The instance, for reads that change nothing (entries, lookups); changes go through `concern`. */
  readonly view: I;
  /**
   * The plugin's concern actor. When it has none now (the plugin is being replaced by a reload, or the
   * process is stopping), snapshot() throws and ask() rejects with ActorGoneError, which the API
   * answers once, as 503 plugin_unavailable.
   */
  readonly concern: ConcernHandle;
}

export interface PluginRoute<I = never> {
  readonly method: HttpMethod;
  /** The least role that may call it (metrics < viewer < operator < admin): every route declares one. */
  readonly role: Role;
  /** Path below /api/plugins/<tag>: "" for the plugin's own path, "entries/:id" with parameters. */
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  /** fastify/JSON schemas; `params` need not list `tag`. */
  readonly schema?: { params?: object; querystring?: object; body?: object; response?: Record<number, object> };
  /** How the body arrives: JSON (default), raw bytes, or a stream of bytes (large uploads decoded as they come). */
  readonly body?: "json" | "raw" | "stream";
  /** 200; 201 for routes that create something; 202 for routes that start work and answer before it finishes. */
  readonly status?: 200 | 201 | 202;
  /** Error codes the route may answer with besides validation (documented in OpenAPI). */
  readonly errors?: readonly string[];
  /** Error code for a body that is not JSON or fails the schema (default invalid_request). */
  readonly invalidBody?: string;
  /** Error code for a query string that fails the schema (default invalid_query). */
  readonly invalidQuery?: string;
  /** Error code when the tag names no plugin serving this route (default plugin_route_not_found). */
  readonly notFound?: string;
  /** A route that changes something: cross-site checks apply even to its safe-looking methods. State-changing routes are never GET. */
  readonly changesState?: boolean;
  /** Largest body accepted, bytes (default: the API's limit). */
  readonly bodyLimit?: number;
  /**
   * A Server-Sent Events route: the handler returns `sseReply(open)`. The API checks Accept (406
   * not_acceptable), sends the headers, a `: heartbeat` comment at once and every api.http.sse_heartbeat (15 s), and gives
   * each client a bounded queue (a slow reader skips frames and is told with `event: dropped`).
   */
  readonly stream?: boolean;
  /** The audit line of a call that changed something, after `<type> <tag> ` (default: method and path). */
  readonly audit?: (req: Pick<RouteRequest, "params" | "query" | "body">) => string;
  handle(req: RouteRequest, plugin: RoutePlugin<I>): RouteReply | object | Promise<RouteReply | object>;
}

/** A field of a JSON body as text for an audit line ("" when absent); long values cut. */
export function bodyField(body: unknown, key: string): string {
  const value = typeof body === "object" && body !== null ? (body as Record<string, unknown>)[key] : undefined;
  if (value === undefined || value === null) return "";
  const text = Array.isArray(value) ? `${value.length} item(s)` : typeof value === "string" || typeof value === "number" || typeof value === "boolean" ? String(value) : "{…}";
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/** A change asked of a concern actor, as other instances of a cluster replay it. */
export type ConcernEvent = { type: string } & Record<string, unknown>;

/**
 * Concern events that, asked through the API of one cluster member, are published and asked of the
 * same plugin on every other member (src/cluster/). `replay` checks what arrived (it comes from
 * outside this process) and adapts it to now: null drops it.
 */
export interface SharedChanges {
  readonly events: readonly string[];
  /**
   * "cluster" (the default): told to the other members of a Redis cluster and to this instance's
   * data-plane workers. "workers": to the workers only (state each instance keeps for itself).
   */
  readonly scope?: "cluster" | "workers";
  replay(event: Record<string, unknown>, now: number): ConcernEvent | null;
  /**
   * The shared events that bring a fresh concern to this one's state (its snapshot's state value and
   * context): what a data-plane worker that (re)starts is told first. Absent: a fresh instance already
   * is (it reads the same files).
   */
  current?(snapshot: { value: unknown; context: unknown }, now: number): ConcernEvent[];
}

export interface PluginControl<I = never> {
  concern?(instance: I, env: ConcernEnv): Concern;
  /**
   * The concern runs for quick-setup instances of the type too (a child of the quick-setup actor),
   * because the instance needs it to work at all (ipset's batch writer). Such a concern declares no
   * start-up; nothing but the instance reaches it (no route or other plugin can address a quick setup).
   */
  readonly quickConcern?: boolean;
  routes?: readonly PluginRoute<I>[];
  shared?: SharedChanges;
  /**
   * The concern is work of the whole service, not of the data plane (cron jobs, downloads): with
   * data-plane workers it runs in the primary only, and a worker's instance has none.
   */
  readonly primaryOnly?: true;
}

/** The actor would not take the event: `guard` is the named guard that refused it (null: no transition at all). */
export class RefusedError extends Error {
  constructor(
    readonly actor: string,
    readonly guard: string | null,
    readonly event: string,
  ) {
    super(`${actor} refused ${event}${guard ? ` (guard ${guard})` : ""}`);
    this.name = "RefusedError";
  }
}

/** The actor stopped (its plugin was destroyed by a reload, or the process is stopping). */
export class ActorGoneError extends Error {
  constructor(readonly actor: string) {
    super(`${actor} is no longer running`);
    this.name = "ActorGoneError";
  }
}

/** A bad request to a plugin route: `code` is looked up in the API's error table for its status. */
export class RouteError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "RouteError";
  }
}
