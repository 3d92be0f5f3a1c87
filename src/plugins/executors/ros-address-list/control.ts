// The ros_address_list plugin's control plane: the ros:<tag> actor (machines/ros-address-list.machine.ts)
// bound to this instance's work, and the read-only status route under /api/plugins/<tag>/.

import type { Logger } from "pino";
import { fromCallback, fromPromise } from "xstate";
import { rosAddressListMachine, type RosCleanupResult, type RosContext, type RosEvent, type RosInput, type RosScanResult } from "../../../../machines/ros-address-list.machine.js";
import type { PluginControl, PluginRoute } from "../../../registry/control.js";
import { ms, type RosArgs } from "./args.js";
import type { RosAddressList } from "./index.js";
import { rosStatusSchema } from "./schemas.js";

/** The manager's timers from the args; periodic scans only with persistent addresses configured. */
export function rosInput(tag: string, args: RosArgs, hasPersistent: boolean): RosInput {
  return {
    tag,
    batchIntervalMs: ms(args.batch_interval),
    reconcileIntervalMs: hasPersistent ? ms(args.reconcile_interval) : null,
    retryBaseMs: ms(args.retry_interval),
    retryMaxMs: 60_000,
    cleanupOnShutdown: args.cleanup_on_shutdown,
    clock: Date.now,
  };
}

/** The outcome of a scan or cleanup in the log (a failure at warn: the manager tries again). */
async function logged<T extends RosScanResult | RosCleanupResult>(log: Logger, what: string, work: Promise<T>, level: "info" | "debug"): Promise<T> {
  try {
    const out = await work;
    const fields: Record<string, number> = { ...out };
    log[level](fields, `ros_address_list: ${what} done`);
    return out;
  } catch (err) {
    log.warn({ err: err instanceof Error ? err.message : String(err) }, `ros_address_list: ${what} failed`);
    throw err;
  }
}

const routes: PluginRoute<RosAddressList>[] = [
  {
    method: "GET",
    role: "viewer",
    path: "sync/status",
    summary: "The manager's state: intake and retry backlog, rows known in the lists, last batch, scan and error",
    schema: { response: { 200: rosStatusSchema } },
    handle(_req, plugin) {
      const snap = plugin.concern.snapshot() as { value: unknown; context: RosContext };
      const p = plugin.view;
      const c = snap.context;
      return {
        ok: true,
        router: p.router,
        state: typeof snap.value === "string" ? snap.value : JSON.stringify(snap.value),
        recovered: c.recovered,
        lists: { ipv4: p.args.address_list4 ?? null, ipv6: p.args.address_list6 ?? null },
        queue: { depth: p.intake.size, capacity: p.intake.capacity, retry: p.backlog.size, dropped: p.c.dropped.value },
        entries: p.manager.counts(),
        batches: c.batches,
        scans: c.scans,
        last_sync_at_ms: c.last_sync_at_ms,
        last_scan_at_ms: c.last_scan_at_ms,
        last_error: c.last_error,
        last_error_at_ms: c.last_error_at_ms,
      };
    },
  },
];

export const rosControl: PluginControl<RosAddressList> = {
  concern: (plugin, env) => ({
    id: `ros:${env.tag}`,
    logic: rosAddressListMachine.provide({
      actors: {
        doorbell: fromCallback<RosEvent>(({ sendBack }) => {
          plugin.intake.doorbell = () => sendBack({ type: "ROS.WORK" });
          return () => {
            plugin.intake.doorbell = null;
          };
        }),
        recover: fromPromise(() => logged(env.log, "start-up scan", plugin.manager.scan(plugin.gone.signal), "info")),
        sync: fromPromise(() => plugin.manager.sync(plugin.gone.signal)),
        reconcile: fromPromise(() => logged(env.log, "reconcile", plugin.manager.scan(plugin.gone.signal), "debug")),
        cleanup: fromPromise(() => logged(env.log, "cleanup", plugin.manager.cleanup(plugin.manager, plugin.router), "info")),
      },
      guards: { rosHasWork: () => plugin.intake.size > 0 || plugin.backlog.size > 0 },
    }),
    input: rosInput(env.tag, plugin.args, plugin.manager.hasPersistent),
  }),
  routes,
};
