// Text stored once and referenced by id (names, client addresses, tags), with a bounded in-memory
// map in front so that a repeated name costs the writer a Map lookup, not a query.

import type { Database, Statement } from "better-sqlite3";

/** Entries held in memory before the map starts over (a cache, not the source of truth). */
const MAX_CACHED = 100_000;

export class Dictionary {
  private readonly cache = new Map<string, number>();
  private readonly select: Statement<[string], number>;
  private readonly insert: Statement<[string]>;
  private readonly byId: Statement<[number], string>;

  constructor(db: Database, table: string, column: string) {
    this.select = db.prepare<[string], number>(`SELECT id FROM ${table} WHERE ${column} = ?`).pluck();
    this.insert = db.prepare<[string]>(`INSERT INTO ${table} (${column}) VALUES (?)`);
    this.byId = db.prepare<[number], string>(`SELECT ${column} FROM ${table} WHERE id = ?`).pluck();
  }

  /** The id of `text`, added when new. Call inside the writer's transaction. */
  id(text: string): number {
    let id = this.cache.get(text);
    if (id !== undefined) return id;
    id = this.select.get(text);
    if (id === undefined) id = Number(this.insert.run(text).lastInsertRowid);
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(text, id);
    return id;
  }

  text(id: number): string | undefined {
    return this.byId.get(id);
  }

  /** Forgets the cached ids (after rows of the table were deleted). */
  reset(): void {
    this.cache.clear();
  }
}

/**
 * Group sets (schema 4): a set is one row of group_sets_v2 (its groups comma-separated, in the
 * provider's order) and one row of group_members_v2 per group, so `group=` finds every set that
 * holds a group through the members' primary key. Keyed in memory by the writer's shared set
 * arrays, so a record costs a WeakMap lookup.
 */
export class GroupSets {
  private cache = new WeakMap<readonly string[], number>();
  private readonly select: Statement<[string], number>;
  private readonly insert: Statement<[string]>;
  private readonly member: Statement<[string, number]>;

  constructor(db: Database) {
    this.select = db.prepare<[string], number>("SELECT id FROM group_sets_v2 WHERE groups = ?").pluck();
    this.insert = db.prepare<[string]>("INSERT INTO group_sets_v2 (groups) VALUES (?)");
    this.member = db.prepare<[string, number]>("INSERT OR IGNORE INTO group_members_v2 (group_name, set_id) VALUES (?, ?)");
  }

  /** The id of the set, added when new; null for no group. Call inside the writer's transaction. */
  id(groups: readonly string[]): number | null {
    if (groups.length === 0) return null;
    let id = this.cache.get(groups);
    if (id !== undefined) return id;
    const text = groups.join(",");
    id = this.select.get(text);
    if (id === undefined) {
      id = Number(this.insert.run(text).lastInsertRowid);
      for (const g of groups) this.member.run(g, id);
    }
    this.cache.set(groups, id);
    return id;
  }

  /** Forgets the cached ids (after rows of the table were deleted). */
  reset(): void {
    this.cache = new WeakMap();
  }
}
