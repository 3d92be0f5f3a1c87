// Connections to Redis shared by the process: the cache tier of every `cache` with `redis`, and the
// cluster's pub/sub, across reloads. One link per URL, kept while an owner holds it; node-redis
// reconnects with capped exponential backoff. Commands fail at once while a link is down (no
// offline queue), so callers fall back to local work instead of waiting. Credentials in a URL are
// never logged or used as a label: links are named by host, port and database only.
// The client library is loaded with the first link: it is a quarter of a second of start-up (some
// 500 modules) that a configuration without Redis never pays.

import { createRequire } from "node:module";
import type * as RedisClientModule from "@redis/client";
import type { Logger } from "../observability/logger.js";
import type { Cell, MetricsHub } from "../observability/metrics.js";
import { redactUrl } from "./redis-url.js";

export { redactUrl, redisUrlProblem } from "./redis-url.js";

/** Longest wait between two reconnection attempts, ms. */
export const MAX_BACKOFF_MS = 5_000;
/** Time allowed to open a connection, ms. */
const CONNECT_TIMEOUT_MS = 2_000;
/** A PING this often notices a connection that died silently. */
const PING_INTERVAL_MS = 5_000;

/** Delay before reconnection attempt `n` (0-based): 100 ms doubling to MAX_BACKOFF_MS, with jitter. */
export function backoff(n: number): number {
  const base = Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(n, 16));
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

let redisModule: typeof RedisClientModule | null = null;
/** @redis/client, loaded on first use (it is CommonJS, so a synchronous require does). */
function redis(): typeof RedisClientModule {
  redisModule ??= createRequire(import.meta.url)("@redis/client") as typeof RedisClientModule;
  return redisModule;
}

function newClient(url: string) {
  return redis().createClient({
    url,
    disableOfflineQueue: true,
    pingInterval: PING_INTERVAL_MS,
    socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: (retries: number) => backoff(retries) },
  });
}

export type RedisClient = ReturnType<typeof newClient>;

function bytesView(client: RedisClient) {
  return client.withTypeMapping({ [redis().RESP_TYPES.BLOB_STRING]: Buffer });
}

/** The same connection, with bulk replies as Buffers (cache entries are bytes). */
export type RedisBytes = ReturnType<typeof bytesView>;

/** One connection to one Redis, shared by its owners. */
export class RedisLink {
  readonly client: RedisClient;
  readonly bytes: RedisBytes;
  readonly owners = new Set<object>();
  /** Set while the link is usable; written by the client's events. */
  private up = false;
  private closed = false;

  constructor(
    readonly url: string,
    /** host:port/db, for logs and the metric label. */
    readonly target: string,
    private readonly upCell: Cell,
    private readonly log: Logger,
  ) {
    this.client = newClient(url);
    this.bytes = bytesView(this.client);
    let downSince = 0;
    this.client.on("ready", () => {
      this.up = true;
      this.upCell.value = 1;
      if (downSince > 0) this.log.info({ target: "redis", redis: target, down_ms: Date.now() - downSince }, "redis reachable again");
      else this.log.info({ target: "redis", redis: target }, "redis connected");
      downSince = 0;
    });
    // node-redis reports every failed attempt; the log says when the state changes, not each retry.
    this.client.on("error", (err: Error) => {
      const wasUp = this.up;
      this.up = false;
      this.upCell.value = 0;
      if (wasUp || downSince === 0) {
        downSince = Date.now();
        this.log.warn({ target: "redis", redis: target, err: err.message }, "redis unreachable; retrying with backoff");
      }
    });
    this.client.on("end", () => {
      this.up = false;
      this.upCell.value = 0;
    });
    this.client.connect().catch(() => undefined);
  }

  /** Connected and answering commands. */
  get ready(): boolean {
    return this.up && !this.closed;
  }

  /** Resolves once ready, or with false after `ms`. */
  async whenReady(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!this.ready && !this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    return this.ready;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.up = false;
    this.upCell.value = 0;
    this.client.destroy();
  }
}

export interface RedisStatus {
  /** No link at all: Redis is not part of this configuration. */
  configured: boolean;
  /** Every link is connected. */
  ok: boolean;
  links: { target: string; ready: boolean }[];
}

export class RedisHub {
  private readonly links = new Map<string, RedisLink>();
  /** Subscriber connections (one per cluster member), reported with the others. */
  private readonly subscribers = new Set<RedisLink>();
  private readonly up: (labels: { target: string }) => Cell;

  constructor(
    metrics: MetricsHub,
    private readonly log: Logger,
  ) {
    this.up = metrics.gauge("redis_up", "1 while the connection to this Redis is up, 0 while it is being retried", ["target"]);
  }

  /** The link for `url`, made on first use; `owner` (a plugin instance, the cluster) holds it until release. */
  acquire(url: string, owner: object): RedisLink {
    let link = this.links.get(url);
    if (!link) {
      const target = redactUrl(url);
      link = new RedisLink(url, target, this.up({ target }), this.log);
      this.links.set(url, link);
    }
    link.owners.add(owner);
    return link;
  }

  /** A second connection to the same Redis for a subscriber (pub/sub takes a connection for itself). */
  subscriber(url: string): RedisLink {
    const target = redactUrl(url);
    const link = new RedisLink(url, target, { value: 0 }, this.log);
    this.subscribers.add(link);
    return link;
  }

  /** A closed subscriber is no longer reported. */
  forget(link: RedisLink): void {
    this.subscribers.delete(link);
  }

  async release(link: RedisLink, owner: object): Promise<void> {
    link.owners.delete(owner);
    if (link.owners.size > 0 || this.links.get(link.url) !== link) return;
    this.links.delete(link.url);
    await link.close();
  }

  status(): RedisStatus {
    const links = [...this.links.values(), ...this.subscribers].map((l) => ({ target: l.target, ready: l.ready }));
    return { configured: links.length > 0, ok: links.every((l) => l.ready), links };
  }

  async closeAll(): Promise<void> {
    const all = [...this.links.values(), ...this.subscribers];
    this.links.clear();
    this.subscribers.clear();
    await Promise.all(all.map((l) => l.close()));
  }
}
