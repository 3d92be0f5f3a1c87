// Loads that a page starts one after another may answer out of order: a filter's Clear and a limit
// change, or a periodic refresh and an edit. Only the newest load's answer may be shown.
import { useRef } from "preact/hooks";

/** Call at the start of each load; the function it gives says whether that load is still the newest. */
export function useNewest(): () => () => boolean {
  const last = useRef(0);
  return () => {
    const n = ++last.current;
    return () => n === last.current;
  };
}
