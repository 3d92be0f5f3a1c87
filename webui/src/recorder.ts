// What the Overview and the Query log read from a query recorder (GET /api/plugins/<tag>/records,
// records/<id>, stats/*, stream; their shapes come from the route schemas, ../shapes), the filter set both pages share,
// and which recorder they read when the configuration has several.

import { signal } from "@preact/signals";
import { api, onSignOut, pluginPath } from "./api";
import type { PluginInfo } from "./features";
import type { FullRecord, RecordRow } from "./shapes";

export type { Distribution, FullRecord, Latency, PluginRow, RecordPage, RecordRow, ResourceRecord, Step, Timeseries, TopClients } from "./shapes";

/** The filters of the records and stats routes; "" leaves one out. */
export interface Filters {
  qname: string;
  client_ip: string;
  /** The client's name (the `clients` provider's), exact. */
  client_name: string;
  /** One of the client's groups, exact. */
  group: string;
  qtype: string;
  rcode: string;
  status: "" | "all" | "error" | "has_response" | "no_response";
  matcher_tag: string;
  since_ms: string;
  until_ms: string;
}

export const NO_FILTERS: Filters = { qname: "", client_ip: "", client_name: "", group: "", qtype: "", rcode: "", status: "", matcher_tag: "", since_ms: "", until_ms: "" };

/** `a=1&b=2` of the filters that are set, plus `extra`. */
export function query(filters: Partial<Filters>, extra: Record<string, string | number> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (typeof v === "string" && v.trim() !== "") q.set(k, v.trim());
  for (const [k, v] of Object.entries(extra)) q.set(k, String(v));
  return q.toString();
}

/** The tag of the recorder both pages read (the first one unless the operator picks another). */
export const recorderTag = signal<string | null>(null);
onSignOut(() => (recorderTag.value = null));

/** The recorder to read among `sources`: the chosen one while it is still configured, else the first. */
export function currentRecorder(sources: PluginInfo[]): string | null {
  const chosen = recorderTag.value;
  if (chosen !== null && sources.some((p) => p.tag === chosen)) return chosen;
  return sources[0]?.tag ?? null;
}

/** GET a recorder route: `recorderGet(tag, "stats/rcode", "qname=x")`. */
export function recorderGet<T>(tag: string, sub: string, q = ""): Promise<T> {
  return api<T>(`${pluginPath(tag, sub)}${q ? `?${q}` : ""}`);
}

const text = (v: string): string => v.trim().toLowerCase();

/**
 * Whether a record from the live stream passes the filters, as the server would filter it: substrings
 * of names and client address, exact client name and group, exact type and rcode (with the `_ERROR`/`_NO_RESPONSE` buckets), status, time
 * range, and a matcher that matched. A record the server would refuse to filter on (a bad value) passes.
 */
export function passes(full: FullRecord, f: Filters): boolean {
  const r = full.record;
  const name = text(f.qname).replace(/\.$/, "");
  if (name && !r.questions_json.some((q) => q.name.toLowerCase().includes(name))) return false;
  if (f.client_ip.trim() && !r.client_ip.toLowerCase().includes(text(f.client_ip))) return false;
  if (f.client_name.trim() && r.client_name !== f.client_name.trim()) return false;
  if (f.group.trim() && !r.client_groups.includes(f.group.trim())) return false;
  if (f.qtype.trim()) {
    const want = text(f.qtype);
    const first = r.questions_json[0]?.qtype.toLowerCase() ?? "";
    if (first !== want && !r.questions_json.some((q) => q.qtype.toLowerCase() === want)) return false;
  }
  if (f.rcode.trim()) {
    const bucket = r.error !== null ? "_error" : !r.has_response ? "_no_response" : (r.rcode ?? "").toLowerCase();
    if (bucket !== text(f.rcode)) return false;
  }
  if (f.status === "error" && r.error === null) return false;
  if (f.status === "has_response" && !r.has_response) return false;
  if (f.status === "no_response" && (r.has_response || r.error !== null)) return false;
  if (f.since_ms && r.created_at_ms < Number(f.since_ms)) return false;
  if (f.until_ms && r.created_at_ms > Number(f.until_ms)) return false;
  if (f.matcher_tag.trim() && !full.steps.some((s) => s.kind === "matcher" && s.tag === f.matcher_tag.trim() && s.outcome === "matched")) return false;
  return true;
}

/** The rcode to show for a record: the mnemonic, or why there is none. */
export const outcomeText = (r: RecordRow): string => (r.error !== null ? "error" : r.has_response ? (r.rcode ?? "—") : "no response");
