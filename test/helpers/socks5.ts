// A SOCKS5 proxy on 127.0.0.1 for tests (RFC 1928; no auth, or user/password of RFC 1929) that records
// where it was asked to connect and pipes the connection there.

import net from "node:net";

export interface Socks5Proxy {
  url: string;
  /** `host:port` of every CONNECT asked, in order. */
  targets: string[];
  close(): Promise<void>;
}

/** A SOCKS5 proxy (no auth, or user/password) that records where it was asked to connect. */
export async function startSocks5(auth?: { user: string; pass: string }): Promise<Socks5Proxy> {
  const targets: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
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
        const host = atyp === 1 ? [...buf.subarray(4, 8)].join(".") : atyp === 3 ? buf.subarray(5, 5 + buf[4]).toString() : "ipv6";
        const port = buf.readUInt16BE(4 + len);
        targets.push(`${host}:${port}`);
        stage = "piped";
        const upstream = net.connect({ host, port }, () => {
          client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
          const rest = buf.subarray(4 + len + 2);
          if (rest.length > 0) upstream.write(rest);
          client.pipe(upstream).pipe(client);
        });
        sockets.add(upstream);
        upstream.on("error", () => client.destroy());
        client.on("error", () => upstream.destroy());
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: auth ? `socks5://${auth.user}:${auth.pass}@127.0.0.1:${port}` : `socks5://127.0.0.1:${port}`,
    targets,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
