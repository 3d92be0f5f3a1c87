// Runs Sluice in-process from YAML text, in a temporary working directory, for integration tests.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { App } from "../../src/app/app.js";
import type { ServerPlugin } from "../../src/registry/types.js";

export interface RunningSluice {
  app: App;
  dir: string;
  /** Port of a server plugin by tag (or the first UDP/TCP server when no tag given). */
  port(tag?: string): number;
  udpPort: number;
  tcpPort: number;
  /** Log lines written so far (parsed JSON). */
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

export function tempDir(prefix = "sluice-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export async function startSluice(yaml: string, files: Record<string, string> = {}): Promise<RunningSluice> {
  const dir = tempDir();
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  const configPath = join(dir, "sluice.yaml");
  writeFileSync(configPath, yaml);
  const logs: Record<string, unknown>[] = [];
  const stdout = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split("\n")) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const app = await App.start({ configPath, baseDir: dir, stdout, logLevel: "debug" });
  const servers = [...app.runtime.plugins.values()].filter((p) => p.kind === "server");
  const port = (tag?: string): number => {
    const live = tag ? app.runtime.live(tag) : servers[0];
    if (!live) throw new Error(`no server '${tag}'`);
    return (live.instance as ServerPlugin).address().port;
  };
  const byProto = (proto: string): number => {
    const s = servers.find((p) => (p.instance as ServerPlugin).address().protocol === proto);
    return s ? (s.instance as ServerPlugin).address().port : 0;
  };
  return {
    app,
    dir,
    port,
    udpPort: byProto("udp"),
    tcpPort: byProto("tcp"),
    logs,
    stop: async () => {
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The usual pair of servers in front of a `main` sequence. */
export function serversYaml(entry = "main"): string {
  return `
  - tag: udp
    type: udp_server
    args: { entry: ${entry}, listen: "127.0.0.1:0" }
  - tag: tcp
    type: tcp_server
    args: { entry: ${entry}, listen: "127.0.0.1:0" }
`;
}
