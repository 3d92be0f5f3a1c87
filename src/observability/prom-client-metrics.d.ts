// prom-client's default collectors, one module each (lib/metrics/*.js, CommonJS, without types of
// their own): each registers its metrics in `registry` (see ./process-metrics.ts).

declare module "prom-client/lib/metrics/*.js" {
  import type { Registry } from "prom-client";
  const collect: (registry: Registry, config: { eventLoopMonitoringPrecision?: number }) => void;
  export default collect;
}
