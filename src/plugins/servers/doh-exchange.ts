// One DoH request and its response, the same shape over HTTP/1.1 (Node's http) and HTTP/2 (Node's
// http2 streams), so the DoH logic (doh.ts) is written once. Error responses carry the project's
// one error shape `{ok:false, code, message}` with the status taken from DOH_ERROR_STATUS.

import http2 from "node:http2";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Readable } from "node:stream";

/** Every status a DoH listener answers other than 200, by error code. */
export const DOH_ERROR_STATUS = {
  bad_dns_query: 400,
  invalid_query: 400,
  invalid_client_id: 400,
  not_found: 404,
  method_not_allowed: 405,
  body_too_large: 413,
  unsupported_media_type: 415,
  server_unavailable: 503,
} as const;

export type DohErrorCode = keyof typeof DOH_ERROR_STATUS;

export interface DohExchange {
  readonly method: string;
  /** Path and query string as sent (`/dns-query?dns=...`). */
  readonly url: string;
  readonly body: Readable;
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** First value of a request header (`name` lower-case). */
  header(name: string): string | undefined;
  /**
   * Sends the whole response; `headers` is a fresh object the exchange may change. `stopReading`:
   * the request body is not wanted (too large): HTTP/1.1
   * closes the connection after the response, HTTP/2 resets the stream once the response is out.
   */
  respond(status: number, headers: OutgoingHttpHeaders, body: Buffer, stopReading?: boolean): void;
  /** True once the client has gone (nothing can be sent). */
  readonly gone: boolean;
}

function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

const JSON_TYPE = "application/json";

export function sendError(ex: DohExchange, code: DohErrorCode, message: string, stopReading = false): void {
  const body = Buffer.from(JSON.stringify({ ok: false, code, message }));
  const headers: OutgoingHttpHeaders = { "content-type": JSON_TYPE, "content-length": body.length, "cache-control": "no-store" };
  if (code === "method_not_allowed") headers.allow = "GET, POST";
  ex.respond(DOH_ERROR_STATUS[code], headers, body, stopReading);
}

export class H1Exchange implements DohExchange {
  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {}

  get method(): string {
    return this.req.method ?? "";
  }

  get url(): string {
    return this.req.url ?? "";
  }

  get body(): Readable {
    return this.req;
  }

  get gone(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  header(name: string): string | undefined {
    return firstValue(this.req.headers[name]);
  }

  respond(status: number, headers: OutgoingHttpHeaders, body: Buffer, stopReading = false): void {
    if (this.gone) return;
    // The rest of the body is never read: the connection cannot carry another request.
    if (stopReading) this.res.shouldKeepAlive = false;
    this.res.writeHead(status, headers);
    this.res.end(body);
  }
}

const { NGHTTP2_NO_ERROR } = http2.constants;

/** Ends a stream whose request body was not read once the response has left. */
function resetAfterResponse(this: http2.ServerHttp2Stream): void {
  if (!this.closed) this.close(NGHTTP2_NO_ERROR);
}

export class H2Exchange implements DohExchange {
  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    readonly remoteAddress: string,
    readonly remotePort: number,
  ) {}

  get method(): string {
    return firstValue(this.headers[":method"]) ?? "";
  }

  get url(): string {
    return firstValue(this.headers[":path"]) ?? "";
  }

  get body(): Readable {
    return this.stream;
  }

  get gone(): boolean {
    return this.stream.destroyed || this.stream.closed || this.stream.headersSent;
  }

  header(name: string): string | undefined {
    return firstValue(this.headers[name]);
  }

  respond(status: number, headers: OutgoingHttpHeaders, body: Buffer, stopReading = false): void {
    if (this.gone) return;
    // The object is the caller's, made for this response: adding the pseudo-header saves a copy.
    headers[":status"] = status;
    this.stream.respond(headers);
    if (stopReading) this.stream.once("finish", resetAfterResponse);
    this.stream.end(body);
  }
}
