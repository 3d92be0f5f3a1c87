// A cache's entries (GET .../entries with qname search and cursor paging), one-entry delete
// (DELETE .../entries/:id), flush (POST .../flush, confirmed inline) and dump download (GET .../dump).
// Delete and flush need the operator role; a viewer browses and downloads only.

import { useSignal } from "@preact/signals";
import { api, errorText, pluginPath, request, send } from "../api";
import { count } from "../format";
import { Badge, Notice } from "../components/ui";
import { can } from "../session";
import type { CacheEntriesPage, CacheEntry, CacheFlushed } from "../shapes";

const PAGE = 50;

export function CacheBrowser({ tag }: { tag: string }) {
  const opened = useSignal(false);
  const search = useSignal("");
  /** The search the shown entries answer. */
  const applied = useSignal("");
  const entries = useSignal<CacheEntry[]>([]);
  const cursor = useSignal<string | null>(null);
  const total = useSignal<number | null>(null);
  const busy = useSignal(false);
  const confirming = useSignal(false);
  const message = useSignal<{ tone: "ok" | "error"; text: string } | null>(null);

  const load = async (more: boolean): Promise<void> => {
    busy.value = true;
    try {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (!more) applied.value = search.value.trim();
      if (applied.value !== "") q.set("qname", applied.value);
      if (more && cursor.value !== null) q.set("cursor", cursor.value);
      const page = await api<CacheEntriesPage>(`${pluginPath(tag, "entries")}?${q.toString()}`);
      entries.value = more ? [...entries.value, ...page.entries] : page.entries;
      cursor.value = page.next_cursor;
      total.value = page.total_entries;
    } catch (err) {
      message.value = { tone: "error", text: errorText(err) };
    } finally {
      busy.value = false;
    }
  };

  const remove = async (entry: CacheEntry): Promise<void> => {
    try {
      await send("DELETE", pluginPath(tag, `entries/${encodeURIComponent(entry.id)}`));
      // With data-plane workers the entry goes from every worker's cache: each row of it leaves.
      const left = entries.value.filter((e) => e.id !== entry.id);
      if (total.value !== null) total.value -= entries.value.length - left.length;
      entries.value = left;
      message.value = { tone: "ok", text: `Deleted ${entry.domain} ${entry.qtype}.` };
    } catch (err) {
      message.value = { tone: "error", text: errorText(err) };
    }
  };

  const flush = async (): Promise<void> => {
    confirming.value = false;
    try {
      const out = await send<CacheFlushed>("POST", pluginPath(tag, "flush"));
      message.value = { tone: "ok", text: `Flushed: ${count(out.cleared_entries)} entries removed.` };
      await load(false);
    } catch (err) {
      message.value = { tone: "error", text: errorText(err) };
    }
  };

  // Fetched (with the session cookie) and handed to the browser as a file, so a refusal shows here as text.
  const download = async (): Promise<void> => {
    try {
      const res = await request(pluginPath(tag, "dump"));
      if (!res.ok) throw new Error(`dump failed: HTTP ${res.status} ${await res.text()}`);
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = `${tag}.dump`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      message.value = { tone: "error", text: errorText(err) };
    }
  };

  const toggle = (e: Event): void => {
    opened.value = (e.currentTarget as HTMLDetailsElement).open;
    if (opened.value && total.value === null) void load(false);
  };

  const operator = can("operator");
  // With data-plane workers each worker caches on its own: rows say which one holds them.
  const byWorker = entries.value.some((e) => e.worker !== undefined);
  return (
    <details class="cache" onToggle={toggle} data-testid={`cache-${tag}`}>
      <summary>Cache entries{total.value !== null ? ` (${count(total.value)}${applied.value ? " matching" : ""})` : ""}</summary>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          void load(false);
        }}
      >
        <label>
          Name contains{" "}
          <input type="search" value={search.value} onInput={(e) => (search.value = (e.currentTarget).value)} aria-label={`Search ${tag} by name`} />
        </label>
        <button type="submit" disabled={busy.value}>
          Search
        </button>
        <button type="button" onClick={() => void download()}>
          Download dump
        </button>
        {!operator ? null : confirming.value ? (
          <span class="confirm">
            <button type="button" class="danger" onClick={() => void flush()}>
              Yes, remove every entry
            </button>
            <button type="button" onClick={() => (confirming.value = false)}>
              Cancel
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => (confirming.value = true)}>
            Flush…
          </button>
        )}
      </form>
      {message.value && <Notice tone={message.value.tone}>{message.value.text}</Notice>}
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Type</th>
              <th scope="col">Rcode</th>
              <th scope="col">Answers</th>
              <th scope="col">TTL left</th>
              {byWorker && <th scope="col">Worker</th>}
              {operator && (
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {entries.value.map((e) => (
              <tr key={`${e.worker ?? 0}:${e.id}`} data-domain={e.domain}>
                <td class="mono nowrap">{e.domain}</td>
                <td>{e.qtype}</td>
                <td>{e.rcode}</td>
                <td class="mono">{e.answers.map((a) => a.payload_text).join(", ") || "—"}</td>
                <td class="nowrap">
                  {e.remaining_ttl} s {e.stale && <Badge tone="warn">stale</Badge>}
                </td>
                {byWorker && <td>{e.worker ?? "—"}</td>}
                {operator && (
                  <td>
                    <button type="button" class="small" onClick={() => void remove(e)} aria-label={`Delete ${e.domain} ${e.qtype}`}>
                      Delete
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {total.value !== null && entries.value.length === 0 && !busy.value && <p class="hint">No entries{applied.value ? ` match “${applied.value}”` : ""}.</p>}
      {cursor.value !== null && (
        <button type="button" onClick={() => void load(true)} disabled={busy.value}>
          Load more
        </button>
      )}
    </details>
  );
}
