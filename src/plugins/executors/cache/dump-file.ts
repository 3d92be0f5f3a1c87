// Reading dump_file at start: a missing file is an empty cache; an unreadable, corrupt or truncated
// one is logged and ignored (the cache starts empty rather than failing the start).

import { open } from "node:fs/promises";
import type { Logger } from "../../../observability/logger.js";

/**
 * Streams `file` into `load` (which decodes in slices: a reload re-reads the file while the old
 * runtime serves DNS); resolves with the entries loaded, 0 when nothing was. `signal` cancels a
 * load still reading (the plugin was destroyed during its start-up).
 */
export async function readDumpFile(file: string, load: (source: AsyncIterable<Uint8Array>) => Promise<number>, log: Logger, signal: AbortSignal): Promise<number> {
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(file, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") log.warn({ file, err: (err as Error).message }, "cache dump could not be read; starting empty");
    return 0;
  }
  try {
    const st = await fh.stat();
    // An empty regular file holds nothing; a FIFO's size says nothing about what it will deliver.
    if (st.isFile() && st.size === 0) return 0;
    const stream = fh.createReadStream({ highWaterMark: 256 * 1024, autoClose: false });
    const cancel = (): void => void stream.destroy(new Error("cache stopped before its dump was loaded"));
    signal.addEventListener("abort", cancel, { once: true });
    try {
      const n = await load(stream);
      log.info({ file, entries: n }, "cache dump loaded");
      return n;
    } finally {
      signal.removeEventListener("abort", cancel);
    }
  } catch (err) {
    if (!signal.aborted) log.warn({ file, err: (err as Error).message }, "cache dump ignored; starting empty");
    return 0;
  } finally {
    await fh.close().catch(() => undefined);
  }
}
