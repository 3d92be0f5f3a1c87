// Runs Sluice in-process with the configuration file in `<dir>/conf/` and the working directory
// (-d) at `<dir>`, to prove that relative paths resolve against the working directory.

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import { App } from "../../src/app/app.js";
import { tempDir } from "./sluice.js";

export interface WorkdirSluice {
  app: App;
  /** The working directory. */
  dir: string;
  port: number;
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

/** Writes `files` (paths relative to the working directory; parents are created). */
export function writeTree(dir: string, files: Record<string, string | Buffer>): void {
  for (const [name, content] of Object.entries(files)) {
    const path = join(dir, name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
}

export async function startInWorkdir(yaml: string, files: Record<string, string | Buffer> = {}): Promise<WorkdirSluice> {
  const dir = tempDir("sluice-workdir-");
  writeTree(dir, { ...files, "conf/sluice.yaml": yaml });
  const logs: Record<string, unknown>[] = [];
  const stdout = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split("\n")) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  let app: App;
  try {
    app = await App.start({ configPath: join(dir, "conf", "sluice.yaml"), baseDir: dir, stdout, logLevel: "debug" });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    app,
    dir,
    port: app.apiServer?.address().port ?? 0,
    logs,
    stop: async () => {
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
