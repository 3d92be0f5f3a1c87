// DNS over HTTPS (RFC 8484) requests: GET `?dns=<base64url>` and POST `application/dns-message`,
// each path to its own QueryHandler; on a path with `json_api`, also GET `?name=&type=` answered in
// JSON (doh-json.ts). The answer keeps the query's ID (RFC 8484 clients send 0, dig checks it) and
// carries `cache-control: max-age=<smallest TTL>`. Bad input gets its status: unknown path 404, bad
// `dns` or JSON API parameters 400, body over 65 535 bytes 413, wrong content type 415, other
// methods 405.

import { isIPv4, isIPv6 } from "node:net";
import { freshnessTtl } from "../../dns/view.js";
import { isPromise } from "../../engine/types.js";
import { clientIdOf } from "../../engine/clients.js";
import { sendError, type DohExchange } from "./doh-exchange.js";
import { parseJsonQuery, renderJson } from "./doh-json.js";
import type { IpPrefixSet } from "../../engine/rules/ip.js";
import type { Answer, QueryHandler } from "./handle.js";

/** Largest POST body (RFC 8484: a DNS message is at most 65 535 bytes). */
export const MAX_DOH_BODY = 65_535;
const DNS_MESSAGE = "application/dns-message";

/** base64url characters (no padding). */
function isB64url(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f;
}

/**
 * Decodes a `dns` parameter, or null when it is not base64url: checked first, because
 * Buffer.from(s, "base64url") silently skips characters it does not know. Correct padding is
 * tolerated although RFC 8484 clients send none.
 */
export function decodeDnsParam(s: string): Buffer | null {
  let end = s.length;
  while (end > 0 && s.charCodeAt(end - 1) === 0x3d) end--;
  const pad = s.length - end;
  if (end === 0 || end % 4 === 1 || pad > 2 || (pad > 0 && s.length % 4 !== 0)) return null;
  if (Math.floor((end * 3) / 4) > MAX_DOH_BODY) return null;
  for (let i = 0; i < end; i++) if (!isB64url(s.charCodeAt(i))) return null;
  return Buffer.from(pad > 0 ? s.slice(0, end) : s, "base64url");
}

/** The `dns` parameter of a query string, or null. */
function dnsParam(query: string): string | null {
  let from = 0;
  while (from <= query.length) {
    let to = query.indexOf("&", from);
    if (to < 0) to = query.length;
    if (query.startsWith("dns=", from)) return query.slice(from + 4, to);
    from = to + 1;
  }
  return null;
}

export interface ClientAddress {
  ip: string;
  port: number | null;
}

/** One entry of a forwarding header: `ip`, `ip:port`, `[v6]` or `[v6]:port`; null when it is none of those. */
export function parseClientEntry(value: string): ClientAddress | null {
  const entry = value.trim();
  const port = (text: string): number | null => (/^\d{1,5}$/.test(text) && Number(text) <= 65535 ? Number(text) : null);
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]");
    const ip = entry.slice(1, close);
    if (close < 0 || !isIPv6(ip)) return null;
    const rest = entry.slice(close + 1);
    if (rest === "") return { ip, port: null };
    const p = rest.startsWith(":") ? port(rest.slice(1)) : null;
    return p === null ? null : { ip, port: p };
  }
  if (isIPv4(entry) || isIPv6(entry)) return { ip: entry, port: null };
  const colon = entry.lastIndexOf(":");
  if (colon < 0) return null;
  const ip = entry.slice(0, colon);
  const p = port(entry.slice(colon + 1));
  return p !== null && isIPv4(ip) ? { ip, port: p } : null;
}

/** Entries of a forwarding header looked at, from the right, before it is given up. */
const MAX_FORWARD_HOPS = 32;

/**
 * The client named by a forwarding header (`X-Forwarded-For`, `X-Real-IP`, ...) that a trusted
 * proxy sent. Each proxy appends the peer it saw, so the entries are read from the right: the first
 * that is not itself a trusted proxy is the client (anything left of it was written by that client
 * and proves nothing); when every entry is a trusted proxy, the left-most. Null (the peer is the
 * client) when an entry reached is not an address, or after MAX_FORWARD_HOPS trusted entries.
 */
export function clientFromHeader(value: string, trusted: IpPrefixSet): ClientAddress | null {
  let end = value.length;
  for (let hop = 0; hop < MAX_FORWARD_HOPS; hop++) {
    const comma = value.lastIndexOf(",", end - 1);
    const entry = parseClientEntry(value.slice(comma + 1, end));
    if (entry === null) return null;
    if (comma < 0 || !trusted.containsText(entry.ip)) return entry;
    end = comma;
  }
  return null;
}

/** Who may name the client in a request header: `header` (lower-case) from peers in `trusted`. */
export interface ClientHeaderPolicy {
  header: string;
  trusted: IpPrefixSet;
}

function mediaType(value: string | undefined): string {
  if (value === undefined) return "";
  const semi = value.indexOf(";");
  return (semi < 0 ? value : value.slice(0, semi)).trim().toLowerCase();
}

/** Sends a DNS answer; `json`: as the JSON API's body of that content type, for the query `json.wire`. */
function sendAnswer(ex: DohExchange, wire: Answer, json?: JsonAnswer): void {
  if (wire === null) return sendError(ex, "bad_dns_query", "not a DNS query (shorter than a header, or a response)");
  const ttl = freshnessTtl(wire);
  const body = json ? renderJson(wire, json.wire) : wire;
  ex.respond(200, { "content-type": json ? json.contentType : DNS_MESSAGE, "content-length": body.length, "cache-control": `max-age=${ttl < 0 ? 0 : ttl}` }, body);
}

interface JsonAnswer {
  wire: Buffer;
  contentType: string;
}

/** The pipeline of one path, and whether the path also speaks the JSON API. */
export interface DohRoute {
  handler: QueryHandler;
  json: boolean;
}

export class DohService {
  /** `clientHeader`: the header naming the client and the proxies believed when they send it, or null. */
  constructor(
    private readonly routes: ReadonlyMap<string, DohRoute>,
    private readonly clientHeader: ClientHeaderPolicy | null,
  ) {}

  /** Answers one request; never throws. */
  readonly serve = (ex: DohExchange): void => {
    const url = ex.url;
    const q = url.indexOf("?");
    const path = q < 0 ? url : url.slice(0, q);
    let route = this.routes.get(path);
    let clientId: string | null = null;
    if (!route) {
      // `<entry path>/<client id>`: the entry's pipeline, with the id for the clients provider.
      const slash = path.lastIndexOf("/");
      route = slash > 0 ? this.routes.get(path.slice(0, slash)) : undefined;
      if (!route) return sendError(ex, "not_found", `no DoH endpoint at ${path}`);
      clientId = clientIdOf(path.slice(slash + 1));
      if (clientId === null) return sendError(ex, "invalid_client_id", `'${path.slice(slash + 1)}' is not a client id (one DNS label: letters, digits, inner hyphens, at most 63)`);
    }
    const handler = route.handler;
    const method = ex.method;
    if (method === "GET") {
      const param = q < 0 ? null : dnsParam(url.slice(q + 1));
      if (param === null && route.json) return this.json(ex, handler, q < 0 ? "" : url.slice(q + 1), clientId);
      if (param === null) return sendError(ex, "bad_dns_query", "GET needs a dns parameter (RFC 8484: ?dns=<base64url DNS message>)");
      const raw = decodeDnsParam(param);
      if (raw === null) return sendError(ex, "bad_dns_query", "the dns parameter is not base64url (A-Z a-z 0-9 - _, no padding)");
      return this.answer(ex, handler, raw, clientId);
    }
    if (method === "POST") return this.post(ex, handler, clientId);
    sendError(ex, "method_not_allowed", `${method} is not a DoH method (GET or POST)`);
  };

  private post(ex: DohExchange, handler: QueryHandler, clientId: string | null): void {
    const type = mediaType(ex.header("content-type"));
    if (type !== DNS_MESSAGE) return sendError(ex, "unsupported_media_type", `POST needs content-type ${DNS_MESSAGE}, not '${type}'`, true);
    const declared = ex.header("content-length");
    if (declared !== undefined && Number(declared) > MAX_DOH_BODY) return sendError(ex, "body_too_large", `a DNS message is at most ${MAX_DOH_BODY} bytes`, true);
    const body = ex.body;
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_DOH_BODY) return void chunks.push(chunk);
      refused = true;
      body.off("data", onData);
      body.pause();
      sendError(ex, "body_too_large", `a DNS message is at most ${MAX_DOH_BODY} bytes`, true);
    };
    body.on("data", onData);
    body.once("end", () => {
      if (refused) return;
      if (size === 0) return sendError(ex, "bad_dns_query", "the POST body is empty");
      this.answer(ex, handler, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size), clientId);
    });
    body.on("error", () => {
      refused = true;
    });
  }

  /** A JSON API request: `?name=&type=` (and `do`, `cd`, `ct`) asked through the same pipeline. */
  private json(ex: DohExchange, handler: QueryHandler, query: string, clientId: string | null): void {
    const parsed = parseJsonQuery(query, ex.header("accept"));
    if (typeof parsed === "string") return sendError(ex, "invalid_query", parsed);
    this.answer(ex, handler, parsed.wire, clientId, parsed.contentType === DNS_MESSAGE ? undefined : parsed);
  }

  private answer(ex: DohExchange, handler: QueryHandler, raw: Buffer, clientId: string | null, json?: JsonAnswer): void {
    let ip = ex.remoteAddress;
    let port = ex.remotePort;
    const policy = this.clientHeader;
    // From any other peer the header is the client's own word: ignored.
    if (policy !== null && policy.trusted.containsText(ip)) {
      const value = ex.header(policy.header);
      const client = value === undefined ? null : clientFromHeader(value, policy.trusted);
      if (client !== null) {
        ip = client.ip;
        if (client.port !== null) port = client.port;
      }
    }
    const answer = handler.handle(raw, ip, port, clientId);
    if (isPromise(answer)) void answer.then((a) => sendAnswer(ex, a, json));
    else sendAnswer(ex, answer, json);
  }
}
