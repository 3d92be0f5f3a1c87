// GET records (a page, newest first, continuing strictly after a cursor) and GET records/<id>, as
// the reader runs them: the page's ids come from the records' time index alone, then each row of
// the page is read by id and decoded.

import type Database from "better-sqlite3";
import { RouteError } from "../../../registry/control.js";
import { filterSql, type Filter } from "./filters.js";
import { recordDetail, recordFields, type RawRecord, type RawStep } from "./json.js";

type Db = Database.Database;
/** A row of RECORD_SELECT. */
export type RecordRow = [number, number, number, string, string, number, string | null, Buffer, Buffer | null, string | null, string | null];

/** A record with its texts (address, client name, group set), from records_v2 as `r`; rawRecord reads its rows. */
export const RECORD_SELECT =
  "SELECT r.id, r.created_at_ms, r.elapsed_us, c.ip, r.instance, r.outcome, r.error, r.query, r.response, n.name, g.groups FROM records_v2 r JOIN clients_v2 c ON c.id = r.client_id LEFT JOIN client_names_v2 n ON n.id = r.client_name_id LEFT JOIN group_sets_v2 g ON g.id = r.group_set_id";
const ROW_SQL = `${RECORD_SELECT} WHERE r.id = ?`;

export function rawRecord([id, createdAtMs, elapsedUs, clientIp, instance, outcome, error, query, response, clientName, groups]: RecordRow): RawRecord {
  return { id, createdAtMs, elapsedUs, clientIp, clientName, clientGroups: groups === null ? [] : groups.split(","), instance, outcome, error, query, response };
}

export function recordsPage(db: Db, f: Filter, cursor: { createdAtMs: number; id: number } | null, limit: number): object {
  const filters = filterSql(f);
  const conds = [`r.created_at_ms BETWEEN ? AND ?`, filters.sql];
  const params: unknown[] = [f.sinceMs ?? 0, f.untilMs ?? Number.MAX_SAFE_INTEGER, ...filters.params];
  if (cursor) {
    conds.push("(r.created_at_ms, r.id) < (?, ?)");
    params.push(cursor.createdAtMs, cursor.id);
  }
  const ids = db
    .prepare(`SELECT r.id, r.created_at_ms FROM records_v2 r INDEXED BY records_v2_time WHERE ${conds.join(" AND ")} ORDER BY r.created_at_ms DESC, r.id DESC LIMIT ?`)
    .raw()
    .all(...params, limit + 1) as [number, number][];
  const more = ids.length > limit;
  const page = ids.slice(0, limit);
  const one = db.prepare(ROW_SQL).raw();
  const records = page.map(([id]) => recordFields(rawRecord(one.get(id) as RecordRow)));
  const last = page[page.length - 1];
  return { ok: true, next_cursor: more && last ? `${last[1]}:${last[0]}` : null, records };
}

export function stepsOf(db: Db, id: number): RawStep[] {
  const rows = db
    .prepare("SELECT s.node_index, s.kind, s.outcome, a.tag, b.tag FROM steps_v2 s JOIN tags_v2 a ON a.id = s.sequence_tag JOIN tags_v2 b ON b.id = s.tag WHERE s.record_id = ? ORDER BY s.event_index")
    .raw()
    .all(id) as [number | null, number, number, string, string][];
  return rows.map(([nodeIndex, kind, outcome, sequenceTag, tag]) => ({ nodeIndex, kind, outcome, sequenceTag, tag }));
}

export function recordById(db: Db, id: number): object {
  const row = db.prepare(ROW_SQL).raw().get(id) as RecordRow | undefined;
  if (!row) throw new RouteError("record_not_found", `record ${id} does not exist`);
  return { ok: true, record: recordDetail(rawRecord(row), stepsOf(db, id)) };
}
