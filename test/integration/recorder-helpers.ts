// Shared by the query recorder's integration tests: a configuration with known traffic shapes, and
// small waits over the real API.

import { expect } from "vitest";
import type { RunningSluice } from "../helpers/sluice.js";

/** JSON of a GET (or other method) against the management API, with its status checked. */
export async function apiJson<T = Record<string, unknown>>(s: RunningSluice, path: string, init?: RequestInit, status = 200): Promise<T> {
  const res = await s.api(path, init);
  const text = await res.text();
  expect(res.status, `${path}: ${text.slice(0, 300)}`).toBe(status);
  return JSON.parse(text) as T;
}

export async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until the recorder `tag` holds at least `n` records (all committed); returns how many it holds. */
export function committed(s: RunningSluice, tag: string, n: number, timeoutMs = 20_000): Promise<number> {
  return until(
    `${n} records in ${tag}`,
    async () => {
      const r = await apiJson<{ sample_size: number }>(s, `/api/plugins/${tag}/stats/rcode`);
      return r.sample_size >= n ? r.sample_size : undefined;
    },
    timeoutMs,
  );
}

export interface RecordJson {
  id: number;
  created_at_ms: number;
  elapsed_ms: number;
  elapsed_us: number;
  request_id: number;
  client_ip: string;
  questions_json: { name: string; qtype: string; qclass: string }[];
  rcode: string | null;
  error: string | null;
  has_response: boolean;
  [field: string]: unknown;
}

export interface Page {
  ok: boolean;
  next_cursor: string | null;
  records: RecordJson[];
}

/** Every record matching `query`, following next_cursor with pages of `limit`. */
export async function allRecords(s: RunningSluice, tag: string, query = "", limit = 500): Promise<RecordJson[]> {
  const out: RecordJson[] = [];
  let cursor: string | null = null;
  for (;;) {
    const sep: string = query ? `&${query}` : "";
    const page: Page = await apiJson<Page>(s, `/api/plugins/${tag}/records?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}${sep}`);
    out.push(...page.records);
    if (page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
}

/** Value of a metric line (first match) in /api/metrics, or 0. */
export async function metric(s: RunningSluice, line: RegExp): Promise<number> {
  const text = await (await s.api("/api/metrics")).text();
  const m = new RegExp(`^${line.source} ([0-9.e+-]+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** Waits until the recorder:<tag> actor reports its writer up (after a start or a restart). */
export function writerUp(s: RunningSluice, tag: string, timeoutMs = 10_000): Promise<true> {
  return until(
    `the writer of ${tag} up`,
    async () => {
      const { actors } = await apiJson<{ actors: { id: string; context: { writer?: string } }[] }>(s, "/api/actors");
      return actors.find((a) => a.id.endsWith(`/recorder:${tag}`))?.context.writer === "up" || undefined;
    },
    timeoutMs,
  );
}

/**
 * Ends a recorder's writer thread abruptly, as a crash would: the tests of the restart path reach
 * into the instance for it (no product code exists for crashing on purpose).
 */
export async function crashWriter(recorder: object): Promise<void> {
  const link = (recorder as { writer?: { worker: { terminate(): Promise<number> }; exited: Promise<void> } | null }).writer;
  if (!link) return;
  void link.worker.terminate();
  await link.exited;
}
