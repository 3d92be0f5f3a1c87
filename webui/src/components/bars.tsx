// Bar lists for distributions (top clients, rcodes, latency buckets) and one stacked bar for shares:
// plain HTML and CSS widths, so they are readable by a screen reader and cost no chart library.

import type { ComponentChildren } from "preact";
import { count } from "../format";

export interface Bar {
  key: string;
  /** What the row shows for the key (defaults to the key). */
  label?: ComponentChildren;
  count: number;
  /** Fraction of the whole, 0–1. */
  share: number;
}

const percent = (share: number): string => `${(share * 100).toFixed(share > 0 && share < 0.001 ? 2 : 1)} %`;

/**
 * One row per key with its count, share and a bar scaled to the largest row. With `onPick`, each key
 * is a button (e.g. "filter by this client").
 */
export function BarList({ rows, testId, empty = "No queries in this range.", onPick, pickLabel }: { rows: Bar[]; testId: string; empty?: string; onPick?: (key: string) => void; pickLabel?: string }) {
  if (rows.length === 0) return <p class="hint">{empty}</p>;
  const top = Math.max(...rows.map((r) => r.count), 1);
  return (
    <ol class="bars" data-testid={testId}>
      {rows.map((r) => (
        <li key={r.key} data-key={r.key} data-count={r.count}>
          <span class="bar-key">
            {onPick ? (
              <button type="button" class="link" title={pickLabel ? `${pickLabel} ${r.key}` : undefined} onClick={() => onPick(r.key)}>
                {r.label ?? r.key}
              </button>
            ) : (
              (r.label ?? r.key)
            )}
          </span>
          <span class="bar-num">
            {count(r.count)} <span class="hint">({percent(r.share)})</span>
          </span>
          <span class="bar-track" aria-hidden="true">
            <span class="bar-fill" style={{ width: `${(r.count / top) * 100}%` }} />
          </span>
        </li>
      ))}
    </ol>
  );
}

export interface Part {
  key: string;
  label: string;
  count: number;
  /** CSS colour. */
  colour: string;
}

/** The parts of a whole as one stacked bar with a legend of counts and shares. */
export function ShareBar({ parts, total, testId }: { parts: Part[]; total: number; testId: string }) {
  return (
    <div class="sharebar" data-testid={testId}>
      <div class="sharebar-track" aria-hidden="true">
        {total > 0 && parts.map((p) => p.count > 0 && <span key={p.key} style={{ width: `${(p.count / total) * 100}%`, background: p.colour }} />)}
      </div>
      <ul class="sharebar-legend">
        {parts.map((p) => (
          <li key={p.key} data-part={p.key} data-count={p.count}>
            <span class="swatch" style={{ background: p.colour }} aria-hidden="true" />
            {p.label}: <strong>{count(p.count)}</strong> <span class="hint">({percent(total > 0 ? p.count / total : 0)})</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
