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
  /** Base URL of the management API (when the config has an `api` section), e.g. http://127.0.0.1:40123 */
  apiUrl: string;
  /** fetch() against the management API; `path` starts with /api/. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Log lines written so far (parsed JSON). */
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

export function tempDir(prefix = "sluice-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * `clockShift`: added to the clock cached answers age by; the test moves it instead of waiting. `dir`:
 * start in this working directory (a restart: what the previous run left there is read again).
 */
export async function startSluice(yaml: string, files: Record<string, string | Uint8Array> = {}, opts: { clockShift?: { ms: number }; dir?: string } = {}): Promise<RunningSluice> {
  const dir = opts.dir ?? tempDir();
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
  const app = await App.start({ configPath, baseDir: dir, stdout, logLevel: "debug", clockShift: opts.clockShift });
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
  const apiAddr = app.apiServer?.address();
  const apiUrl = apiAddr ? `${apiAddr.protocol}://${apiAddr.address.includes(":") ? `[${apiAddr.address}]` : apiAddr.address}:${apiAddr.port}` : "";
  return {
    app,
    dir,
    port,
    apiUrl,
    api: (path, init) => {
      if (!apiUrl) throw new Error("this configuration has no api section");
      return fetch(apiUrl + path, init);
    },
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

/**
 * A configuration with the management API and `main` running `exec`, in front of a UDP server
 * (and a TCP server unless `tcp` is null). Addresses default to 127.0.0.1 port 0.
 */
export function apiYaml(exec: string, at: { api?: string; udp?: string; tcp?: string | null } = {}): string {
  const tcp = at.tcp === null ? "" : `  - { tag: tcp, type: tcp_server, args: { entry: main, listen: "${at.tcp ?? "127.0.0.1:0"}" } }\n`;
  return `api:
  http: ${at.api ?? "127.0.0.1:0"}
plugins:
  - tag: main
    type: sequence
    args:
      - exec: ${exec}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "${at.udp ?? "127.0.0.1:0"}" } }
${tcp}`;
}
