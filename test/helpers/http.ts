// Raw HTTP(S) requests for API tests: the path is sent exactly as written (fetch would normalise
// `/../` and friends), and TLS options (CA, client certificate) can be given.

import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

export interface RawRequest {
  host?: string;
  port: number;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  /** HTTPS with these options (ca to trust; cert/key to present a client certificate). */
  tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  timeoutMs?: number;
  /** The client's own address (e.g. 127.0.0.2, to be another client). */
  localAddress?: string;
}

export function rawRequest(opts: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const common = {
      host: opts.host ?? "127.0.0.1",
      port: opts.port,
      method: opts.method ?? "GET",
      path: opts.path ?? "/",
      headers: opts.headers ?? {},
      agent: false as const,
      ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
    };
    const onResponse = (res: IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("error", reject);
      res.on("end", () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString("utf8") });
      });
    };
    const req = opts.tls ? httpsRequest({ ...common, ...opts.tls }, onResponse) : httpRequest(common, onResponse);
    req.setTimeout(opts.timeoutMs ?? 5000, () => req.destroy(new Error("request timed out")));
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** The JSON body of a response (throws with the text when it is not JSON). */
export function jsonOf(res: RawResponse): Record<string, unknown> {
  try {
    return JSON.parse(res.text) as Record<string, unknown>;
  } catch {
    throw new Error(`not JSON (status ${res.status}): ${res.text.slice(0, 200)}`);
  }
}
