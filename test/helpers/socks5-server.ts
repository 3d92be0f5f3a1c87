// A minimal SOCKS5 proxy on 127.0.0.1 port 0 for tests (RFC 1928: no authentication, CONNECT only, to
// IPv4 addresses and host names): it records each CONNECT's destination and then relays the bytes.

import net from "node:net";

export interface Socks5Server {
  port: number;
  /** Destinations asked for, as "host:port". */
  connects: string[];
  close(): Promise<void>;
}

export async function startSocks5Server(): Promise<Socks5Server> {
  const connects: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    let buf = Buffer.alloc(0);
    let stage: "greeting" | "request" | "relay" = "greeting";
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      if (stage === "greeting") {
        if (buf.length < 2 || buf.length < 2 + buf[1]) return;
        buf = buf.subarray(2 + buf[1]);
        client.write(Buffer.from([5, 0]));
        stage = "request";
      }
      if (stage === "request") {
        if (buf.length < 5) return;
        const atyp = buf[3];
        const addrLen = atyp === 1 ? 4 : atyp === 3 ? 1 + buf[4] : 16;
        if (buf.length < 4 + addrLen + 2) return;
        const host = atyp === 1 ? [...buf.subarray(4, 8)].join(".") : atyp === 3 ? buf.toString("latin1", 5, 5 + buf[4]) : "::1";
        const port = buf.readUInt16BE(4 + addrLen);
        const rest = buf.subarray(4 + addrLen + 2);
        stage = "relay";
        client.off("data", onData);
        connects.push(`${host}:${port}`);
        const upstream = net.connect(port, host, () => {
          client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          if (rest.length > 0) upstream.write(rest);
          client.pipe(upstream);
          upstream.pipe(client);
        });
        sockets.add(upstream);
        upstream.on("close", () => {
          sockets.delete(upstream);
          client.destroy();
        });
        upstream.on("error", () => client.destroy(new Error("upstream failed")));
        client.on("close", () => upstream.destroy());
      }
    };
    client.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connects,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
