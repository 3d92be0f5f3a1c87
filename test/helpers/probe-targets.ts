// Addresses a TCP probe can reach on this host only, all on one port P, for tests of `ip_selector`:
// 127.0.0.1:P and [::1]:P accept (listeners that count connections), 127.0.0.2:P refuses (nothing is bound
// there), and 127.0.0.3:P never answers: its listener's accept queue is full (a worker thread that listens
// and then sleeps never accepts), so the kernel drops new SYNs and a connect hangs until the prober gives
// up. Nothing leaves the machine: 127.0.0.0/8 is all loopback. (TEST-NET addresses are not used: on some
// hosts 192.0.2.0/24 is the local network, and others are answered by a transparent proxy.)

import net from "node:net";
import { Worker } from "node:worker_threads";

export interface ProbeTargets {
  port: number;
  /** Connections each accepting listener took, by address ("127.0.0.1", "::1"). */
  accepted: Map<string, number>;
  close(): Promise<void>;
}

const SILENT_HOST = "127.0.0.3";

/** A listener on 127.0.0.3 that never accepts; its port, and how to end it. */
async function startSilent(): Promise<{ port: number; close(): Promise<void> }> {
  const wake = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const server = require("node:net").createServer();
     server.listen({ host: workerData.host, port: 0, backlog: 1 }, () => {
       parentPort.postMessage(server.address().port);
       Atomics.wait(workerData.wake, 0, 0);
       server.close();
     });`,
    { eval: true, workerData: { host: SILENT_HOST, wake } },
  );
  const port = await new Promise<number>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  // Fill the accept queue: connections complete until it is full; the first that does not is proof.
  const held: net.Socket[] = [];
  let full = false;
  for (let i = 0; i < 16 && !full; i++) {
    const s = net.connect(port, SILENT_HOST);
    s.on("error", () => undefined);
    full = !(await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 150);
      s.once("connect", () => {
        clearTimeout(timer);
        resolve(true);
      });
    }));
    held.push(s);
  }
  const close = async (): Promise<void> => {
    for (const s of held) s.destroy();
    Atomics.store(wake, 0, 1);
    Atomics.notify(wake, 0);
    await worker.terminate();
  };
  if (!full) {
    await close();
    throw new Error("could not fill the accept queue of the silent listener");
  }
  return { port, close };
}

function listen(server: net.Server, port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, host, () => resolve(true));
  });
}

export async function startProbeTargets(): Promise<ProbeTargets> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const silent = await startSilent();
    const accepted = new Map<string, number>([
      ["127.0.0.1", 0],
      ["::1", 0],
    ]);
    const servers = [...accepted.keys()].map((host) =>
      net.createServer((sock) => {
        accepted.set(host, (accepted.get(host) ?? 0) + 1);
        sock.on("error", () => undefined);
        sock.destroy();
      }),
    );
    const bound = await Promise.all(servers.map((s, i) => listen(s, silent.port, [...accepted.keys()][i])));
    const close = async (): Promise<void> => {
      await Promise.all(servers.filter((_, i) => bound[i]).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      await silent.close();
    };
    if (bound.every(Boolean)) return { port: silent.port, accepted, close };
    // Another socket has that port on loopback: try another.
    await close();
  }
  throw new Error("no port free on 127.0.0.1, ::1 and 127.0.0.3 at once");
}

/** A TCP port on 127.0.0.1 with nothing listening on it (bound, read back, released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await listen(server, 0, "127.0.0.1");
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
