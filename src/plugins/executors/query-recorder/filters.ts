// The filters every records and stats route accepts, parsed on the API's thread into a plain value
// (bad input is a 400 invalid_query before any worker is asked), and turned into SQL over the
// records table's time index in the reader.

import { parseRcode, parseType } from "../../../dns/constants.js";
import { RouteError } from "../../../registry/control.js";
import { NAME_PATTERN } from "../../providers/clients/args.js";
import { OUTCOME_ERROR, OUTCOME_NO_RESPONSE } from "./schema.js";

export type Status = "all" | "error" | "has_response" | "no_response";
export type PluginKind = "matcher" | "executor" | "builtin" | "all";

export interface Filter {
  sinceMs: number | null;
  untilMs: number | null;
  /** Lower-case substring of a question name. */
  qname: string | null;
  /** Lower-case substring of the client address. */
  clientIp: string | null;
  qtype: number | null;
  /** An rcode, or OUTCOME_ERROR / OUTCOME_NO_RESPONSE (the `_ERROR` and `_NO_RESPONSE` buckets). */
  outcome: number | null;
  status: Status;
  /** Records in which this matcher matched. */
  matcherTag: string | null;
  /** Records of this Sluice instance (exact name). */
  instance: string | null;
  /** Records of the client of this name (exact, as the `clients` provider named it). */
  clientName: string | null;
  /** Records of clients in this group (exact name). */
  group: string | null;
}

/** How stats/top_clients groups records: per address, or per client name (unnamed clients per address). */
export type TopClientsBy = "ip" | "name";


export type ReadRequest =
  | { op: "records"; filter: Filter; cursor: { createdAtMs: number; id: number } | null; limit: number }
  | { op: "record"; id: number }
  | { op: "stats"; stat: "plugins"; filter: Filter; kind: PluginKind }
  | { op: "stats"; stat: "top_clients"; filter: Filter; limit: number; by: TopClientsBy }
  | { op: "stats"; stat: "top_qnames"; filter: Filter; limit: number }
  | { op: "stats"; stat: "qtype" | "rcode"; filter: Filter }
  | { op: "stats"; stat: "latency"; filter: Filter; slowLimit: number }
  | { op: "stats"; stat: "timeseries"; filter: Filter; bucketMs: number; buckets: number; nowMs: number };

const invalid = (message: string): RouteError => new RouteError("invalid_query", message);

/** Empty and whitespace-only values count as absent. */
function text(q: Record<string, unknown>, key: string): string | null {
  const v = q[key];
  if (typeof v !== "string" && typeof v !== "number") return null;
  const s = String(v).trim();
  return s === "" ? null : s;
}

function int(q: Record<string, unknown>, key: string): number | null {
  const v = q[key];
  if (v === undefined || v === null || (typeof v === "string" && v.trim() === "")) return null;
  const n = typeof v === "number" ? v : Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw invalid(`${key} must be a non-negative integer (Unix ms)`);
  return n;
}

/** An instance name: what `cluster.instance` allows, or a host name (up to 253 characters). */
export const INSTANCE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;
/** A client or group name, as the `clients` provider allows them. */
const CLIENT_NAME = new RegExp(NAME_PATTERN);

function clientName(q: Record<string, unknown>, key: "client_name" | "group", what: string): string | null {
  const v = text(q, key);
  if (v !== null && !CLIENT_NAME.test(v)) throw invalid(`${key} '${v.slice(0, 70)}' is not a ${what} name (letters, digits, '.', '_', '-'; at most 63)`);
  return v;
}

export function parseFilter(q: Record<string, unknown>): Filter {
  const sinceMs = int(q, "since_ms");
  const untilMs = int(q, "until_ms");
  if (sinceMs !== null && untilMs !== null && sinceMs > untilMs) throw invalid("since_ms must not be after until_ms");
  const qtypeText = text(q, "qtype");
  const qtype = qtypeText === null ? null : parseType(qtypeText);
  if (qtype === undefined) throw invalid(`qtype '${qtypeText}' is not a DNS type (e.g. A, AAAA, TYPE65)`);
  const rcodeText = text(q, "rcode");
  let outcome: number | null = null;
  if (rcodeText !== null) {
    const upper = rcodeText.toUpperCase();
    const r = upper === "_ERROR" ? OUTCOME_ERROR : upper === "_NO_RESPONSE" ? OUTCOME_NO_RESPONSE : parseRcode(upper);
    if (r === undefined) throw invalid(`rcode '${rcodeText}' is not a response code (e.g. NOERROR, NXDOMAIN, SERVFAIL, _ERROR, _NO_RESPONSE)`);
    outcome = r;
  }
  const status = (text(q, "status") ?? "all").toLowerCase();
  if (status !== "all" && status !== "error" && status !== "has_response" && status !== "no_response") throw invalid(`status must be one of all, error, has_response, no_response (got '${status}')`);
  let qname = text(q, "qname")?.toLowerCase() ?? null;
  // A trailing dot still matches: stored names end with one.
  if (qname !== null && qname.length > 255) throw invalid("qname is longer than a domain name can be");
  const clientIp = text(q, "client_ip")?.toLowerCase() ?? null;
  if (clientIp !== null && clientIp.length > 64) throw invalid("client_ip is longer than an address can be");
  if (qname === "") qname = null;
  const instance = text(q, "instance");
  if (instance !== null && !INSTANCE.test(instance)) throw invalid(`instance '${instance.slice(0, 70)}' is not an instance name (letters, digits, '_', '.', '-')`);
  return { sinceMs, untilMs, qname, clientIp, qtype, outcome, status, matcherTag: text(q, "matcher_tag"), instance, clientName: clientName(q, "client_name", "client"), group: clientName(q, "group", "group") };
}

/** Only a time range: the rollups can answer. */
export const onlyTime = (f: Filter): boolean =>
  f.qname === null && f.clientIp === null && f.qtype === null && f.outcome === null && f.status === "all" && f.matcherTag === null && f.instance === null && f.clientName === null && f.group === null;

const like = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * The WHERE clause (on records_v2 as `r`) for the filters other than time, and its parameters.
 * Every column it tests but `instance` is in records_v2_time, so a scan rarely reads the table itself
 * (a client name or a group is looked up once, by its dictionary's index, then tested in the index).
 */
export function filterSql(f: Filter): { sql: string; params: unknown[] } {
  const conds: string[] = [];
  const params: unknown[] = [];
  if (f.qname !== null) {
    const names = "SELECT id FROM names_v2 WHERE name LIKE ? ESCAPE '\\'";
    conds.push(`(r.name_id IN (${names}) OR (r.question_count > 1 AND EXISTS (SELECT 1 FROM questions_v2 q WHERE q.record_id = r.id AND q.name_id IN (${names}))))`);
    params.push(like(f.qname), like(f.qname));
  }
  if (f.clientIp !== null) {
    conds.push("r.client_id IN (SELECT id FROM clients_v2 WHERE ip LIKE ? ESCAPE '\\')");
    params.push(like(f.clientIp));
  }
  if (f.qtype !== null) {
    conds.push("(r.qtype = ? OR (r.question_count > 1 AND EXISTS (SELECT 1 FROM questions_v2 q WHERE q.record_id = r.id AND q.qtype = ?)))");
    params.push(f.qtype, f.qtype);
  }
  if (f.outcome !== null) {
    conds.push("r.outcome = ?");
    params.push(f.outcome);
  }
  if (f.status === "error") conds.push(`r.outcome = ${OUTCOME_ERROR}`);
  else if (f.status === "has_response") conds.push("r.outcome >= 0");
  else if (f.status === "no_response") conds.push(`r.outcome = ${OUTCOME_NO_RESPONSE}`);
  if (f.matcherTag !== null) {
    conds.push("r.id IN (SELECT record_id FROM steps_v2 WHERE kind = 0 AND outcome = 0 AND tag = (SELECT id FROM tags_v2 WHERE tag = ?))");
    params.push(f.matcherTag);
  }
  if (f.clientName !== null) {
    conds.push("r.client_name_id = (SELECT id FROM client_names_v2 WHERE name = ?)");
    params.push(f.clientName);
  }
  if (f.group !== null) {
    conds.push("r.group_set_id IN (SELECT set_id FROM group_members_v2 WHERE group_name = ?)");
    params.push(f.group);
  }
  if (f.instance !== null) {
    // Not in the time index: a SQLite store rarely holds more than one instance's records.
    conds.push("r.instance = ?");
    params.push(f.instance);
  }
  return { sql: conds.length > 0 ? conds.join(" AND ") : "1", params };
}
