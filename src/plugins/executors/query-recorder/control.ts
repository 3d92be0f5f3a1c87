// The recorder's control plane: the `recorder:<tag>` actor (machines/recorder.machine.ts) bound to
// this instance — it owns the writer thread (adopting the one init started, starting another after
// a crash, closing it when the plugin goes), runs the cleanups and the clears — and the routes.

import { fromCallback, fromPromise } from "xstate";
import { recorderMachine, type RecorderEvent } from "../../../../machines/recorder.machine.js";
import type { PluginControl } from "../../../registry/control.js";
import type { QueryRecorder } from "./executor.js";
import { routes } from "./routes.js";

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export const recorderControl: PluginControl<QueryRecorder> = {
  concern: (recorder, env) => ({
    id: `recorder:${env.tag}`,
    logic: recorderMachine.provide({
      actors: {
        writer: fromCallback<RecorderEvent, { tag: string }>(({ sendBack }) => {
          let stopped = false;
          const tell = (e: RecorderEvent): void => {
            if (!stopped) sendBack(e);
          };
          recorder.watchWriter((error) => tell({ type: "WRITER.EXITED", error: error ? error.message : null }));
          if (recorder.writerRunning) tell({ type: "WRITER.READY" });
          else
            recorder.startWriter().then(
              () => tell({ type: "WRITER.READY" }),
              (err: unknown) => {
                env.log.warn({ err: errorText(err) }, "query recorder writer could not start; retrying");
                tell({ type: "WRITER.EXITED", error: errorText(err) });
              },
            );
          return () => {
            stopped = true;
            recorder.watchWriter(null);
            void recorder.closeWriter();
          };
        }),
        clear: fromPromise(() => recorder.clear()),
        cleanup: fromPromise(() => recorder.cleanup()),
      },
    }),
    input: { tag: env.tag, cleanupIntervalMs: recorder.options.cleanupIntervalMs },
  }),
  routes,
};
