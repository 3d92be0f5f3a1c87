// The record stream's source with a PostgreSQL store, in the writer thread: while someone listens,
// it LISTENs for the NOTIFY every writer (of any instance) sends after a batch, and also looks every
// POLL_MS, then reads the records after the last id it has seen and hands them on as SSE frames.
// Replays are read from the store with ids up to that same last id, in the same queue as the reads
// of new records, so a client gets its replay, then every later record, with no gap and nothing
// twice (writers commit ids in increasing order: pg-store.ts).

import type pg from "pg";
import { recordFrame } from "./json.js";
import { pgRecordsAfter } from "./pg-reads.js";
import { pgClient, pgNames, type PgOptions } from "./pg-schema.js";

const POLL_MS = 500;
/** Most records read per look; more wait for the next one (a stream client keeps up or is told it dropped). */
const MAX_PER_READ = 2048;

export class PgFeed {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private lastId: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();
  private live = false;
  private readonly channel: string;

  constructor(
    private readonly options: PgOptions,
    private readonly memoryTail: number,
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

  private async newestId(c: pg.Client): Promise<number> {
    return Number((await c.query<{ id: string | null }>(`SELECT max(id) AS id FROM ${pgNames(this.options.schema).records}`)).rows[0].id ?? 0);
  }

  /** Someone listens (true) or nobody does any more. */
  setLive(on: boolean): void {
    if (on === this.live) return;
    this.live = on;
    if (on) {
      // Records from here on are new; older ones only come by replay.
      void this.queue(async (c) => {
        this.lastId ??= await this.newestId(c);
      });
      this.timer = setInterval(() => void this.look(), POLL_MS);
      this.timer.unref();
      return;
    }
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.lastId = null;
    this.drop();
  }

  /** Reads and hands on the records after the last one seen. */
  private look(): Promise<void> {
    return this.queue(async (c) => {
      if (!this.live) return;
      this.lastId ??= await this.newestId(c);
      const entries = await pgRecordsAfter(c, this.options.schema, this.lastId, null, MAX_PER_READ);
      if (entries.length === 0) return;
      this.lastId = entries[entries.length - 1].record.id;
      this.frames(entries.map((e) => recordFrame(e.record, e.steps)));
    });
  }

  /** The newest `tail` records, or those after `afterId` (at most memory_tail), up to the last one handed on. */
  replay(client: number, tail: number, afterId: number | null): void {
    let answered = false;
    void this.queue(async (c) => {
      this.lastId ??= await this.newestId(c);
      const entries = await pgRecordsAfter(c, this.options.schema, afterId ?? 0, this.lastId, afterId === null ? tail : this.memoryTail);
      answered = true;
      this.replayed(client, entries.map((e) => recordFrame(e.record, e.steps)));
    }).then(() => {
      // The store cannot be read now: no replay, but the client gets the new records once it can.
      if (!answered) this.replayed(client, []);
    });
  }

  close(): Promise<void> {
    this.setLive(false);
    return this.chain;
  }
}
