// SLOT(part 2): pages whose routes the server offers but whose views come in the dashboard's second
// part (Overview, Query log). They say so and point at the API; they show no data.

import type { PluginInfo } from "../features";

export function SlotPage({ title, what, sources }: { title: string; what: string; sources: PluginInfo[] }) {
  return (
    <section aria-labelledby="slot-title" data-slot={title}>
      <header class="page-head">
        <h1 id="slot-title">{title}</h1>
      </header>
      <p>
        The server offers {what} ({sources.map((p) => p.tag).join(", ")}), but this dashboard version has no view for it yet.
      </p>
      <ul>
        {sources.flatMap((p) =>
          p.routes.map((r) => (
            <li key={r} class="mono">
              {r}
            </li>
          )),
        )}
      </ul>
    </section>
  );
}
