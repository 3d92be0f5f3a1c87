// The record stream's source with a PostgreSQL store, in the writer thread: while someone listens,
// it LISTENs for the NOTIFY every writer (of any instance) sends after a batch, and also looks every
// POLL_MS, then reads the records after the last id it has handed on and hands them on as SSE frames.
// Where it starts is fixed when it goes live, from what the writer knows (pg-store.ts: the newest id
// any instance committed), not when the store first answers it: a stream opened while the store
// takes no new connections gets every record committed meanwhile once it does.
// A client's replay is fixed when it asks too: the newest `tail` records up to the last id handed
// on then (or those after its Last-Event-ID), and every record handed on since; it is answered
// before the next read of new records, in the same queue, so the client gets its replay, then every
// later record, with no gap and nothing twice (writers commit ids in increasing order: pg-store.ts).
// A replay the store cannot answer now waits for the next look.

import type pg from "pg";
import { recordFrame } from "./json.js";
import { pgRecordsAfter } from "./pg-reads.js";
import { pgClient, pgNames, type PgOptions } from "./pg-schema.js";

const POLL_MS = 500;
/** Most records read per look; more wait for the next one (a stream client keeps up or is told it dropped). */
const MAX_PER_READ = 2048;

interface Replay {
  client: number;
  tail: number;
  afterId: number | null;
  /** The last id handed on when the client asked (null: not known yet, see `since`). */
  from: number | null;
}

export class PgFeed {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  /** The last id handed on to live clients (null: not known yet). */
  private lastId: number | null = null;
  /** When the feed went live (Unix ms): the start when the writer knew no id then. */
  private since = 0;
  private replays: Replay[] = [];
  private timer: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();
  private live = false;
  private readonly channel: string;

  constructor(
    private readonly options: PgOptions,
    private readonly memoryTail: number,
    /** The newest id the writer knows was committed, or null. */
    private readonly newestKnown: () => number | null,
    private readonly frames: (frames: string[]) => void,
    private readonly replayed: (client: number, frames: string[]) => void,
  ) {
    this.channel = pgNames(options.schema).channel;
  }

  /** Work in order, one at a time; a failure (the server is down) is tried again at the next look. */
  private queue(work: (c: pg.Client) => Promise<void>): Promise<void> {
    this.chain = this.chain.then(async () => {
      try {
        await work(await this.connect());
      } catch {
        this.drop();
      }
    });
    return this.chain;
  }

  private connect(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= (async () => {
      const c = pgClient(this.options, () => this.drop());
      try {
        await c.connect();
        c.on("notification", () => void this.look());
        await c.query(`LISTEN ${this.channel}`);
        this.client = c;
        return c;
      } catch (err) {
        void c.end().catch(() => undefined);
        throw err;
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  private drop(): void {
    const c = this.client;
    this.client = null;
    void c?.end().catch(() => undefined);
  }

  /** The last id handed on; when none is known, the newest record created before the feed went live. */
  private async position(c: pg.Client): Promise<number> {
    this.lastId ??= Number((await c.query<{ id: string | null }>(`SELECT max(id) AS id FROM ${pgNames(this.options.schema).records} WHERE created_at_ms < $1`, [this.since])).rows[0].id ?? 0);
    return this.lastId;
  }

  /** Someone listens (true) or nobody does any more. */
  setLive(on: boolean): void {
    if (on === this.live) return;
    this.live = on;
    if (on) {
      // Records from here on are new; older ones only come by replay.
      this.lastId = this.newestKnown();
      this.since = Date.now();
      this.timer = setInterval(() => void this.look(), POLL_MS);
      this.timer.unref();
      void this.look();
      return;
    }
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.lastId = null;
    this.replays = [];
    this.drop();
  }

  /** Answers the replays waiting, then reads and hands on the records after the last one handed on. */
  private look(): Promise<void> {
    return this.queue(async (c) => {
      if (!this.live) return;
      const last = await this.position(c);
      while (this.replays.length > 0) {
        await this.answer(c, this.replays[0], last);
        this.replays.shift();
      }
      const entries = await pgRecordsAfter(c, this.options.schema, last, null, MAX_PER_READ);
      if (entries.length === 0) return;
      this.lastId = entries[entries.length - 1].record.id;
      this.frames(entries.map((e) => recordFrame(e.record, e.steps)));
    });
  }

  /** A replay up to `last`: after Last-Event-ID (at most memory_tail), or the `tail` before the client's start and everything since. */
  private async answer(c: pg.Client, r: Replay, last: number): Promise<void> {
    const { schema } = this.options;
    let entries: Awaited<ReturnType<typeof pgRecordsAfter>>;
    if (r.afterId !== null) entries = await pgRecordsAfter(c, schema, r.afterId, last, this.memoryTail);
    else {
      const from = r.from ?? last;
      entries = r.tail > 0 ? await pgRecordsAfter(c, schema, 0, from, r.tail) : [];
      // Handed on to the others since this client asked (at most one look's worth).
      if (last > from) entries = entries.concat(await pgRecordsAfter(c, schema, from, last, MAX_PER_READ));
    }
    this.replayed(r.client, entries.map((e) => recordFrame(e.record, e.steps)));
  }

  /** The newest `tail` records, or those after `afterId` (at most memory_tail), then every record from where the client asked. */
  replay(client: number, tail: number, afterId: number | null): void {
    if (!this.live) return;
    this.replays.push({ client, tail, afterId, from: this.lastId });
    void this.look();
  }

  close(): Promise<void> {
    this.setLive(false);
    return this.chain;
  }
}
