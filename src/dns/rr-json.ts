// Resource records as the API shows them (cache entries, query recorder): mnemonics for type and
// class, the record data in presentation format (`payload_text`) and as an object (`payload`) whose
// shape `payload_kind` names. Names are absolute, with a trailing dot. Off the hot path.

import { className, QTYPE, typeName } from "./constants.js";
import { formatIP } from "./ip.js";
import type { ResourceRecord } from "./message.js";
import { readName } from "./name.js";

export interface RrJson {
  name: string;
  class: string;
  ttl: number;
  rr_type: string;
  /** a, aaaa, name, mx, txt, soa, srv, caa, svcb or unknown. */
  payload_kind: string;
  payload_text: string;
  payload: Record<string, unknown>;
}

const fqdn = (name: string): string => (name === "" ? "." : `${name}.`);

/** A character-string as it appears in zone files: quoted, with `"` and `\` escaped and others as \DDD. */
function quoted(bytes: Buffer): string {
  let out = '"';
  for (const b of bytes) {
    if (b === 0x22 || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
    else if (b < 0x20 || b > 0x7e) out += `\\${b.toString().padStart(3, "0")}`;
    else out += String.fromCharCode(b);
  }
  return `${out}"`;
}

function characterStrings(data: Buffer, from = 0): Buffer[] {
  const out: Buffer[] = [];
  let p = from;
  while (p < data.length) {
    const len = data[p];
    if (p + 1 + len > data.length) throw new RangeError("character-string runs past the record");
    out.push(data.subarray(p + 1, p + 1 + len));
    p += 1 + len;
  }
  return out;
}

const SVC_KEYS = ["mandatory", "alpn", "no-default-alpn", "port", "ipv4hint", "ech", "ipv6hint"];

function svcParamText(key: number, value: Buffer): string {
  const name = SVC_KEYS[key] ?? `key${key}`;
  switch (key) {
    case 0: {
      const keys: string[] = [];
      for (let i = 0; i + 1 < value.length; i += 2) keys.push(SVC_KEYS[value.readUInt16BE(i)] ?? `key${value.readUInt16BE(i)}`);
      return `${name}=${keys.join(",")}`;
    }
    case 1:
      return `${name}=${characterStrings(value).map((s) => s.toString("latin1")).join(",")}`;
    case 2:
      return name;
    case 3:
      return `${name}=${value.readUInt16BE(0)}`;
    case 4:
    case 6: {
      const width = key === 4 ? 4 : 16;
      const ips: string[] = [];
      for (let i = 0; i + width <= value.length; i += width) ips.push(formatIP(value.subarray(i, i + width)));
      return `${name}=${ips.join(",")}`;
    }
    case 5:
      return `${name}=${value.toString("base64")}`;
    default:
      return `${name}=${quoted(value)}`;
  }
}

type Payload = { kind: string; text: string; payload: Record<string, unknown> };

function unknownPayload(data: Buffer): Payload {
  const hex = data.toString("hex");
  return { kind: "unknown", text: `\\# ${data.length}${hex ? ` ${hex}` : ""}`, payload: { hex } };
}

function decodePayload(rr: ResourceRecord): Payload {
  const d = rr.data;
  switch (rr.type) {
    case QTYPE.A:
    case QTYPE.AAAA: {
      const address = formatIP(d);
      return { kind: rr.type === QTYPE.A ? "a" : "aaaa", text: address, payload: { address } };
    }
    case QTYPE.NS:
    case QTYPE.CNAME:
    case QTYPE.PTR:
    case 39 /* DNAME */: {
      const target = fqdn(readName(d, 0).name);
      return { kind: "name", text: target, payload: { target } };
    }
    case QTYPE.MX: {
      const preference = d.readUInt16BE(0);
      const exchange = fqdn(readName(d, 2).name);
      return { kind: "mx", text: `${preference} ${exchange}`, payload: { preference, exchange } };
    }
    case QTYPE.TXT: {
      const parts = characterStrings(d);
      return { kind: "txt", text: parts.map(quoted).join(" "), payload: { strings: parts.map((s) => s.toString("utf8")) } };
    }
    case QTYPE.SOA: {
      const m = readName(d, 0);
      const r = readName(d, m.end);
      const p = r.end;
      const soa = {
        mname: fqdn(m.name),
        rname: fqdn(r.name),
        serial: d.readUInt32BE(p),
        refresh: d.readUInt32BE(p + 4),
        retry: d.readUInt32BE(p + 8),
        expire: d.readUInt32BE(p + 12),
        minimum: d.readUInt32BE(p + 16),
      };
      return { kind: "soa", text: `${soa.mname} ${soa.rname} ${soa.serial} ${soa.refresh} ${soa.retry} ${soa.expire} ${soa.minimum}`, payload: soa };
    }
    case QTYPE.SRV: {
      const srv = { priority: d.readUInt16BE(0), weight: d.readUInt16BE(2), port: d.readUInt16BE(4), target: fqdn(readName(d, 6).name) };
      return { kind: "srv", text: `${srv.priority} ${srv.weight} ${srv.port} ${srv.target}`, payload: srv };
    }
    case 257 /* CAA */: {
      const flags = d[0];
      const tagLen = d[1];
      const tag = d.subarray(2, 2 + tagLen).toString("latin1");
      const value = d.subarray(2 + tagLen);
      return { kind: "caa", text: `${flags} ${tag} ${quoted(value)}`, payload: { flags, tag, value: value.toString("utf8") } };
    }
    case 64 /* SVCB */:
    case 65 /* HTTPS */: {
      const priority = d.readUInt16BE(0);
      const t = readName(d, 2);
      const params: string[] = [];
      for (let p = t.end; p < d.length; ) {
        const key = d.readUInt16BE(p);
        const len = d.readUInt16BE(p + 2);
        if (p + 4 + len > d.length) throw new RangeError("SvcParam runs past the record");
        params.push(svcParamText(key, d.subarray(p + 4, p + 4 + len)));
        p += 4 + len;
      }
      const target = fqdn(t.name);
      return { kind: "svcb", text: [String(priority), target, ...params].join(" "), payload: { priority, target, params } };
    }
    default:
      return unknownPayload(d);
  }
}

export function rrJson(rr: ResourceRecord): RrJson {
  let p: Payload;
  try {
    p = decodePayload(rr);
  } catch {
    // Data too short for its type: shown as bytes rather than failing the whole listing.
    p = unknownPayload(rr.data);
  }
  return { name: fqdn(rr.name), class: className(rr.class), ttl: rr.ttl, rr_type: typeName(rr.type), payload_kind: p.kind, payload_text: p.text, payload: p.payload };
}
