// unbound as a real DNS, DoT and DoH server for upstream tests, started on ports it is told
// (it cannot bind port 0: a free port is found by binding 0 and closing), answering `localData`.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildQuery, udpExchange } from "./dns.js";
import { freePort } from "./ports.js";
import { requireTool } from "./tools.js";

export const UNBOUND = "/usr/sbin/unbound";

/** Fails with a clear message when unbound is missing (npm test installs it). */
export function requireUnbound(): void {
  requireTool("unbound");
  if (spawnSync(UNBOUND, ["-V"], { stdio: "ignore" }).status !== 0) throw new Error(`${UNBOUND} -V failed: is the Debian package unbound installed whole?`);
}

export interface UnboundServer {
  child: ChildProcess;
  dns: number;
  dot: number;
  doh: number;
  log(): string;
  stop(): Promise<void>;
}

export interface UnboundOptions {
  /** Directory for the configuration (and where cert/key paths are). */
  dir: string;
  cert: string;
  key: string;
  /** `local-data` records, e.g. `a.up.test. 300 IN A 192.0.2.1`. */
  localData: string[];
  /** `local-zone` values, e.g. `"up.test." redirect` (every name below answered by the zone's own data). */
  zones: string[];
}

function config(o: UnboundOptions, ports: { dns: number; dot: number; doh: number }): string {
  return [
    "server:",
    "  do-daemonize: no",
    '  chroot: ""',
    '  username: ""',
    `  directory: "${o.dir}"`,
    '  pidfile: ""',
    "  use-syslog: no",
    '  logfile: ""',
    "  verbosity: 1",
    `  interface: 127.0.0.1@${ports.dns}`,
    `  interface: 127.0.0.1@${ports.dot}`,
    `  interface: 127.0.0.1@${ports.doh}`,
    `  tls-port: ${ports.dot}`,
    `  https-port: ${ports.doh}`,
    `  tls-service-key: "${o.key}"`,
    `  tls-service-pem: "${o.cert}"`,
    '  http-endpoint: "/dns-query"',
    "  num-threads: 1",
    "  access-control: 127.0.0.0/8 allow",
    "  do-ip6: no",
    "  so-reuseport: no",
    '  module-config: "iterator"',
    '  local-zone: "test." nodefault',
    ...o.zones.map((z) => `  local-zone: ${z}`),
    ...o.localData.map((r) => `  local-data: "${r}"`),
    "",
  ].join("\n");
}

/** Starts unbound and waits until it answers over plain DNS (TLS listeners open with it). */
export async function startUnbound(o: UnboundOptions, name = "unbound"): Promise<UnboundServer> {
  requireUnbound();
  let lastLog = "";
  for (let attempt = 0; attempt < 3; attempt++) {
    const ports = { dns: await freePort(), dot: await freePort(), doh: await freePort() };
    const path = join(o.dir, `${name}.conf`);
    writeFileSync(path, config(o, ports));
    const child = spawn(UNBOUND, ["-d", "-c", path], { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    child.stdout.on("data", (d: Buffer) => (log += d.toString()));
    child.stderr.on("data", (d: Buffer) => (log += d.toString()));
    let exited = false;
    const gone = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));
    const stop = async (): Promise<void> => {
      if (!exited) child.kill("SIGTERM");
      await gone;
    };
    const probe = buildQuery(o.localData[0].split(" ")[0], "A");
    const deadline = Date.now() + 10_000;
    while (!exited && Date.now() < deadline) {
      if ((await udpExchange(ports.dns, probe, 200)) !== null) return { child, ...ports, log: () => log, stop };
    }
    await stop();
    lastLog = log;
    // Another process took a port between the probe and unbound's bind: try new ones.
    if (!/can't bind|Address already in use/i.test(log)) break;
  }
  throw new Error(`unbound did not start:\n${lastLog}`);
}
