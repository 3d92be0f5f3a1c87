// A port for a program that cannot be told to pick its own (redis-server, unbound, the cluster example's
// script): free for TCP and UDP on 127.0.0.1 when asked. It is drawn at random below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range starts at 32768), where no test's port-0 bind can land,
// so another file running beside this one cannot take it between the check and the program's bind.

import dgram from "node:dgram";
import net from "node:net";

const LOW = 20000;
const HIGH = 32767;

function tcpFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

function udpFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const u = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
    u.once("error", () => resolve(false));
    u.bind(port, host, () => u.close(() => resolve(true)));
  });
}

/** A port free for both TCP and UDP on `host` right now, outside the range port 0 draws from. */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  for (;;) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if ((await tcpFree(port, host)) && (await udpFree(port, host))) return port;
  }
}
