// The DoH probe (RFC 8484 over HTTP/2, as `forward` speaks it): connect and TLS handshake (timed, ALPN
// h2), one POST of application/dns-message (timed from request to answer), then two requests at once on
// the same session (HTTP/2 streams: the DoH form of pipelining).

import http2 from "node:http2";
import type { TLSSocket } from "node:tls";
import { acceptAnswer, packetWithId } from "../engine/upstream/exchange.js";
import { hostPort } from "../engine/upstream/address.js";
import { connectTls } from "../engine/upstream/tls-client.js";
import type { DnsResponse } from "../dns/response.js";
import { deadline, emptyResult, failureText, noteAnswer, round, shownMs, since, tlsSetup, type Pipelining, type ProbeResult, type ProbeSettings, type ProbeTarget } from "./result.js";

const MAX_BODY = 65_535;

/** One POST; resolves with the answer or rejects with the reason there is none. */
function post(session: http2.ClientHttp2Session, path: string, query: Buffer): Promise<DnsResponse> {
  return new Promise<DnsResponse>((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/dns-message", accept: "application/dns-message" });
    let status = 0;
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on("response", (headers) => (status = Number(headers[":status"])));
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) stream.close(http2.constants.NGHTTP2_CANCEL);
      else chunks.push(chunk);
    });
    stream.on("error", reject);
    stream.on("close", () => {
      if (status !== 200) return reject(new Error(status === 0 ? `stream closed without a response (code ${stream.rstCode})` : `HTTP status ${status}`));
      const answer = acceptAnswer(Buffer.concat(chunks), query, 0);
      if (answer) resolve(answer);
      else reject(new Error("the body is not an answer to the query"));
    });
    stream.end(packetWithId(query, 0, false));
  });
}

export async function probeDoh(target: ProbeTarget, ip: string, settings: ProbeSettings): Promise<ProbeResult> {
  const result = emptyResult(target, ip.includes(":") ? `[${ip}]:${target.port}` : `${ip}:${target.port}`);
  const ms = settings.timeoutMs;
  const t0 = performance.now();
  let connectedAt = 0;
  const tls: TLSSocket = connectTls(tlsSetup(target, settings), ip, target.port, ["h2"]);
  tls.once("connect", () => (connectedAt = performance.now()));
  const authority = target.port === 443 ? hostPort(target.host, 443).replace(/:443$/, "") : hostPort(target.host, target.port);
  const session = http2.connect(`https://${authority}`, { createConnection: () => tls, settings: { enablePush: false } });
  session.on("error", () => undefined);
  const limit = (what: string): ReturnType<typeof deadline> => deadline(ms, `${what} within ${shownMs(ms)}`);
  try {
    const up = limit("no TLS handshake");
    try {
      await Promise.race([
        new Promise<void>((resolve, reject) => {
          session.once("connect", () => resolve());
          session.once("error", reject);
          tls.once("error", reject);
        }),
        up.expired,
      ]);
    } finally {
      up.cancel();
    }
    const secureAt = performance.now();
    result.connect_ms = round(connectedAt - t0);
    result.tls_handshake_ms = round(secureAt - connectedAt);
    result.tls_version = tls.getProtocol();
    result.alpn = typeof tls.alpnProtocol === "string" ? tls.alpnProtocol : null;
    const answered = limit("no answer");
    try {
      const sent = performance.now();
      const answer = await Promise.race([post(session, target.path, settings.query), answered.expired]);
      noteAnswer(result, answer, since(sent));
    } finally {
      answered.cancel();
    }
  } catch (err) {
    result.error = failureText(err);
    session.destroy();
    return result;
  }
  result.pipelining = await twoAtOnce(session, target.path, settings.query, ms);
  session.destroy();
  return result;
}

async function twoAtOnce(session: http2.ClientHttp2Session, path: string, query: Buffer, ms: number): Promise<Pipelining> {
  const both = deadline(ms, `not both answered within ${shownMs(ms)}`);
  const order: number[] = [];
  const one = (n: number): Promise<void> => post(session, path, query).then(() => void order.push(n));
  try {
    await Promise.race([Promise.all([one(0), one(1)]), both.expired]);
  } catch (err) {
    return { works: false, in_order: null, detail: `${order.length} of 2 requests sent at once answered (${failureText(err)})` };
  } finally {
    both.cancel();
  }
  const inOrder = order[0] === 0;
  return { works: true, in_order: inOrder, detail: `2 requests at once on one HTTP/2 connection, both answered${inOrder ? " in order" : ", out of order"}` };
}
