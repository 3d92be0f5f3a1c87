// A TCP relay in front of a real server that counts the connections it carries: how many TLS
// handshakes a client made, seen from outside the client.

import net from "node:net";

export interface Relay {
  port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startRelay(targetPort: number, targetHost = "127.0.0.1"): Promise<Relay> {
  let connections = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
      s.on("close", () => {
        open.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)));
  return {
    port,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
