// A ticker for pages that poll: calls the latest `fn` every `ms` while the component is mounted,
// and never starts a call while the previous one is still running (a slow server delays the next).

import { useEffect, useRef } from "preact/hooks";

export function useEvery(ms: number, fn: () => Promise<void> | void): void {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    let busy = false;
    const timer = window.setInterval(() => {
      if (busy) return;
      busy = true;
      void Promise.resolve()
        .then(() => latest.current())
        // Callers show their own errors; a missed tick is retried by the next one.
        .catch(() => undefined)
        .finally(() => (busy = false));
    }, ms);
    return () => clearInterval(timer);
  }, [ms]);
}
