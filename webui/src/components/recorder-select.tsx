// Which query recorder the Overview and the Query log read, shown only when there are several.

import type { PluginInfo } from "../features";
import { recorderTag } from "../recorder";

export function RecorderSelect({ sources, current }: { sources: PluginInfo[]; current: string }) {
  if (sources.length < 2) return null;
  return (
    <label>
      Recorder{" "}
      <select value={current} onChange={(e) => (recorderTag.value = e.currentTarget.value)} data-testid="recorder-select">
        {sources.map((p) => (
          <option key={p.tag} value={p.tag}>
            {p.tag}
          </option>
        ))}
      </select>
    </label>
  );
}
