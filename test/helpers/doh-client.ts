// DoH clients for tests: HTTP/2 (over TLS, or h2c with prior knowledge) and HTTP/1.1 (over TLS or
// cleartext), built on Node's own http2/https/http modules.

import http, { type OutgoingHttpHeaders } from "node:http";
import http2 from "node:http2";
import https from "node:https";

export interface HttpReply {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: Buffer;
}

export interface RequestSpec {
  method?: string;
  path: string;
  headers?: OutgoingHttpHeaders;
  body?: Buffer;
  /** Local address to connect from (HTTP/1.1 only), e.g. another loopback address. */
  localAddress?: string;
}

/** base64url without padding, as RFC 8484 GET wants. */
export const b64url = (b: Buffer): string => b.toString("base64url");

/** One request on an HTTP/2 session (`origin` like https://127.0.0.1:443 or http://127.0.0.1:80). */
export function h2Request(session: http2.ClientHttp2Session, spec: RequestSpec, timeoutMs = 5000): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": spec.method ?? "GET", ":path": spec.path, ...spec.headers });
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`no HTTP/2 answer for ${spec.path} in ${timeoutMs} ms`));
    }, timeoutMs);
    let status = 0;
    let headers: HttpReply["headers"] = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      headers = h;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      clearTimeout(timer);
      if (status !== 0) return resolve({ status, headers, body: Buffer.concat(chunks) });
      // Ended with no answer: reset by the server, or its connection closed. The code is known at 'close'.
      const started = performance.now();
      stream.once("close", () => reject(new Error(`the stream ended without an answer (reset code ${stream.rstCode ?? "none"}, session ${session.destroyed ? "gone" : "open"}, ${Math.round(performance.now() - started)} ms to close)`)));
    });
    stream.on("error", (err: Error) => {
      clearTimeout(timer);
      reject(err);
    });
    stream.end(spec.body);
  });
}

export function h2Connect(origin: string, ca?: Buffer): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(origin, { ca });
    session.once("connect", () => resolve(session));
    session.once("error", reject);
  });
}

/** One request on a fresh HTTP/2 connection, closed afterwards. */
export async function h2Once(origin: string, spec: RequestSpec, ca?: Buffer): Promise<HttpReply & { alpn: string | undefined }> {
  const session = await h2Connect(origin, ca);
  try {
    const reply = await h2Request(session, spec);
    return { ...reply, alpn: session.alpnProtocol };
  } finally {
    session.close();
  }
}

/** One HTTP/1.1 request (no keep-alive) to `origin` (https:// or http://). */
export function h1Request(origin: string, spec: RequestSpec, ca?: Buffer, timeoutMs = 5000): Promise<HttpReply & { httpVersion: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(spec.path, origin);
    const options = { method: spec.method ?? "GET", headers: spec.headers, ca, agent: false as const, timeout: timeoutMs, ALPNProtocols: ["http/1.1"], localAddress: spec.localAddress };
    const req = (url.protocol === "https:" ? https : http).request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), httpVersion: res.httpVersion }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`no HTTP/1.1 answer for ${spec.path} in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(spec.body);
  });
}
