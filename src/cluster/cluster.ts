// Shared runtime state over Redis pub/sub: a change made through one member's API (a matcher mode
// with its duration, a provider reload, a cache flush) is published on `sluice:cluster:<name>` and
// asked of the same plugin's concern actor on every other member, the way its own API would
// (`apply`, provided by the App). Each member ignores its own messages by a random id made at
// start. Messages are small JSON (control plane, never the DNS path), checked before use: a
// message is at most MAX_MESSAGE_BYTES, names a plugin tag and type, and carries one event that the
// plugin type declares shared and that its `replay` accepts.

import { randomUUID } from "node:crypto";
import type { ClusterConfig } from "../config/cluster.js";
import type { Logger } from "../observability/logger.js";
import type { Cell, MetricsHub } from "../observability/metrics.js";
import type { RedisHub, RedisLink } from "./redis.js";

/** Longest message read; anything longer is not from Sluice. */
export const MAX_MESSAGE_BYTES = 8 * 1024;
const PROTOCOL = 1;

/** A change as it travels between members. */
export interface SharedChange {
  /** The plugin's tag and type: a member applies it only to a plugin of that tag and type. */
  tag: string;
  type: string;
  event: Record<string, unknown> & { type: string };
}

interface Message extends SharedChange {
  v: number;
  /** The sender's id (random per process) and name. */
  from: string;
  instance: string;
}

export type ApplyOutcome = "applied" | "ignored" | "failed";

export interface ClusterStats {
  sent: Cell;
  sendFailed: Cell;
  own: Cell;
  applied: Cell;
  ignored: Cell;
  failed: Cell;
  invalid: Cell;
}

function clusterStats(metrics: MetricsHub): ClusterStats {
  const m = metrics.counter("cluster_messages_total", "Cluster messages: sent, send_failed, own (ignored: from this instance), applied, ignored (no such plugin here), failed, invalid", ["result"]);
  return {
    sent: m({ result: "sent" }),
    sendFailed: m({ result: "send_failed" }),
    own: m({ result: "own" }),
    applied: m({ result: "applied" }),
    ignored: m({ result: "ignored" }),
    failed: m({ result: "failed" }),
    invalid: m({ result: "invalid" }),
  };
}

const TAG = /^[^\s]{1,128}$/;

/** The message in `text`, or null when it is not one this version sends. */
export function parseMessage(text: string): Message | null {
  if (text.length > MAX_MESSAGE_BYTES) return null;
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof m !== "object" || m === null) return null;
  const o = m as Record<string, unknown>;
  const event = o.event as Record<string, unknown> | null;
  if (o.v !== PROTOCOL || typeof o.from !== "string" || typeof o.instance !== "string") return null;
  if (typeof o.tag !== "string" || !TAG.test(o.tag) || typeof o.type !== "string" || !TAG.test(o.type)) return null;
  if (typeof event !== "object" || event === null || Array.isArray(event) || typeof event.type !== "string") return null;
  return { v: PROTOCOL, from: o.from, instance: o.instance.slice(0, 64), tag: o.tag, type: o.type, event: event as SharedChange["event"] };
}

export class ClusterLink {
  /** Random per process: how a member knows its own messages. */
  readonly id = randomUUID();
  readonly channel: string;
  private readonly publisher: RedisLink;
  private readonly subscriber: RedisLink;
  private readonly stats: ClusterStats;
  private closed = false;

  constructor(
    readonly config: ClusterConfig,
    readonly instance: string,
    private readonly hub: RedisHub,
    metrics: MetricsHub,
    private readonly log: Logger,
    private readonly apply: (change: SharedChange, from: string) => Promise<ApplyOutcome>,
  ) {
    this.channel = `sluice:cluster:${config.name}`;
    this.stats = clusterStats(metrics);
    this.publisher = hub.acquire(config.redis, this);
    this.subscriber = hub.subscriber(config.redis);
    // node-redis subscribes again by itself after a reconnection.
    this.subscriber.client.subscribe(this.channel, (text: string) => void this.receive(text)).catch((err: unknown) => {
      if (!this.closed) this.log.warn({ target: "cluster", cluster: config.name, err: (err as Error).message }, "could not subscribe to the cluster channel; retrying on reconnection");
    });
    this.log.info({ target: "cluster", cluster: config.name, instance, redis: this.publisher.target }, "cluster member started");
  }

  /** Tells the other members about a change this instance's API made; never throws (the change is made here already). */
  publish(change: SharedChange): void {
    if (this.closed) return;
    if (!this.publisher.ready) {
      this.stats.sendFailed.value++;
      this.log.warn({ target: "cluster", cluster: this.config.name, plugin: change.tag, event: change.event.type }, "redis is unreachable: this change was not sent to the other members");
      return;
    }
    const message: Message = { v: PROTOCOL, from: this.id, instance: this.instance, ...change };
    this.publisher.client.publish(this.channel, JSON.stringify(message)).then(
      () => {
        this.stats.sent.value++;
      },
      (err: unknown) => {
        this.stats.sendFailed.value++;
        this.log.warn({ target: "cluster", cluster: this.config.name, plugin: change.tag, err: (err as Error).message }, "a change could not be sent to the other members");
      },
    );
  }

  private async receive(text: string): Promise<void> {
    const m = parseMessage(text);
    const s = this.stats;
    if (m === null) {
      s.invalid.value++;
      this.log.warn({ target: "cluster", cluster: this.config.name }, "ignored a message on the cluster channel that is not a Sluice change");
      return;
    }
    if (m.from === this.id) {
      s.own.value++;
      return;
    }
    let outcome: ApplyOutcome;
    try {
      outcome = await this.apply({ tag: m.tag, type: m.type, event: m.event }, m.instance);
    } catch (err) {
      outcome = "failed";
      this.log.warn({ target: "cluster", from: m.instance, plugin: m.tag, event: m.event.type, err: (err as Error).message }, "a change from another member could not be applied");
    }
    if (outcome === "applied") s.applied.value++;
    else if (outcome === "ignored") s.ignored.value++;
    else s.failed.value++;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.subscriber.close();
    this.hub.forget(this.subscriber);
    await this.hub.release(this.publisher, this);
  }
}
