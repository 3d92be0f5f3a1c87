// A SOCKS5 proxy on 127.0.0.1 (RFC 1928 CONNECT, no auth or RFC 1929 user/password) that records
// where it was asked to connect and where each client came from.

import net from "node:net";

export interface Socks5Server {
  /** socks5://[user:pass@]127.0.0.1:<port> */
  url: string;
  port: number;
  /** `host:port` of every CONNECT, in order (a name as the client sent it: the proxy resolves it). */
  targets: string[];
  /** Remote address of every client connection accepted. */
  clients: string[];
  close(): Promise<void>;
}

export async function startSocks5(auth?: { user: string; pass: string }): Promise<Socks5Server> {
  const targets: string[] = [];
  const clients: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    clients.push(client.remoteAddress ?? "");
    client.on("close", () => sockets.delete(client));
    let buf = Buffer.alloc(0);
    let stage: "greet" | "auth" | "connect" | "piped" = "greet";
    client.on("data", (d: Buffer) => {
      if (stage === "piped") return;
      buf = Buffer.concat([buf, d]);
      if (stage === "greet" && buf.length >= 2 && buf.length >= 2 + buf[1]) {
        const methods = [...buf.subarray(2, 2 + buf[1])];
        buf = buf.subarray(2 + buf[1]);
        const method = auth ? 2 : 0;
        client.write(Buffer.from([5, methods.includes(method) ? method : 0xff]));
        stage = auth ? "auth" : "connect";
      }
      if (stage === "auth" && buf.length >= 2 && buf.length >= 3 + buf[1] && buf.length >= 3 + buf[1] + buf[2 + buf[1]]) {
        const user = buf.subarray(2, 2 + buf[1]).toString();
        const pass = buf.subarray(3 + buf[1], 3 + buf[1] + buf[2 + buf[1]]).toString();
        buf = buf.subarray(3 + buf[1] + buf[2 + buf[1]]);
        const ok = auth !== undefined && user === auth.user && pass === auth.pass;
        client.write(Buffer.from([1, ok ? 0 : 1]));
        if (!ok) return void client.end();
        stage = "connect";
      }
      if (stage === "connect" && buf.length >= 5) {
        const atyp = buf[3];
        const len = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + buf[4];
        if (buf.length < 4 + len + 2) return;
        const v6 = (b: Buffer): string => Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16)).join(":");
        const host = atyp === 1 ? [...buf.subarray(4, 8)].join(".") : atyp === 3 ? buf.subarray(5, 5 + buf[4]).toString() : v6(buf.subarray(4, 20));
        const port = buf.readUInt16BE(4 + len);
        targets.push(`${host}:${port}`);
        stage = "piped";
        // A name is resolved here, the way a real proxy would: `*.localhost` and `localhost` are loopback.
        const connectTo = /(^|\.)localhost$/.test(host) ? "127.0.0.1" : host;
        const upstream = net.connect({ host: connectTo, port }, () => {
          client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          const rest = buf.subarray(4 + len + 2);
          if (rest.length > 0) upstream.write(rest);
          client.pipe(upstream).pipe(client);
        });
        sockets.add(upstream);
        upstream.on("close", () => sockets.delete(upstream));
        upstream.on("error", () => {
          // Connection refused (or a reset): REP 5, then close.
          if (!client.destroyed) client.end(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0]));
        });
        client.on("error", () => upstream.destroy());
        client.on("close", () => upstream.destroy());
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: auth ? `socks5://${auth.user}:${auth.pass}@127.0.0.1:${port}` : `socks5://127.0.0.1:${port}`,
    port,
    targets,
    clients,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
