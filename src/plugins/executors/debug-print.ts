// `debug_print`: logs the request and the current response (decoded, compact) at debug level.

import { className, FLAG, opcodeName, QTYPE, rcodeName, typeName } from "../../dns/constants.js";
import { formatIP } from "../../dns/ip.js";
import { messageRcode, type Message, type ResourceRecord } from "../../dns/message.js";
import { fqdn } from "../../dns/name.js";
import { rdataName, readSoa } from "../../dns/rdata.js";
import type { DnsResponse } from "../../dns/response.js";
import { Step } from "../../engine/types.js";
import { definePlugin } from "../../registry/types.js";

interface DebugPrintArgs {
  msg: string;
}

const FLAG_NAMES: [number, string][] = [
  [FLAG.QR, "qr"],
  [FLAG.AA, "aa"],
  [FLAG.TC, "tc"],
  [FLAG.RD, "rd"],
  [FLAG.RA, "ra"],
  [FLAG.AD, "ad"],
  [FLAG.CD, "cd"],
];

/** RDATA in presentation form for the common types; RFC 3597 `\# len hex` for the rest. */
function rdataText(r: ResourceRecord): string {
  try {
    switch (r.type) {
      case QTYPE.A:
      case QTYPE.AAAA:
        if (r.data.length === 4 || r.data.length === 16) return formatIP(r.data);
        break;
      case QTYPE.CNAME:
      case QTYPE.NS:
      case QTYPE.PTR:
      case QTYPE.DNAME:
        return fqdn(rdataName(r.data));
      case QTYPE.MX:
        return `${r.data.readUInt16BE(0)} ${fqdn(rdataName(r.data, 2))}`;
      case QTYPE.SOA: {
        const s = readSoa(r.data);
        return `${fqdn(s.mname)} ${fqdn(s.rname)} ${s.serial} ${s.refresh} ${s.retry} ${s.expire} ${s.minimum}`;
      }
      case QTYPE.TXT: {
        const parts: string[] = [];
        for (let i = 0; i < r.data.length; i += 1 + r.data[i]) parts.push(JSON.stringify(r.data.toString("latin1", i + 1, i + 1 + r.data[i])));
        return parts.join(" ");
      }
    }
  } catch {
    // fall through to the generic form
  }
  return `\\# ${r.data.length}${r.data.length > 0 ? ` ${r.data.toString("hex")}` : ""}`;
}

const recordText = (r: ResourceRecord): string => `${fqdn(r.name)} ${r.ttl} ${className(r.class)} ${typeName(r.type)} ${rdataText(r)}`;

/** A compact, JSON-friendly view of a message: header words, then one string per record. */
export function describeMessage(m: Message): Record<string, unknown> {
  return {
    id: m.id,
    opcode: opcodeName((m.flags >> 11) & 0x0f),
    rcode: rcodeName(messageRcode(m)),
    flags: FLAG_NAMES.filter(([bit]) => (m.flags & bit) !== 0).map(([, name]) => name).join(" "),
    question: m.questions.map((q) => `${fqdn(q.name)} ${className(q.class)} ${typeName(q.type)}`),
    answer: m.answers.map(recordText),
    authority: m.authorities.map(recordText),
    additional: m.additionals.map(recordText),
    edns: m.edns ? { udp: m.edns.udpSize, version: m.edns.version, do: (m.edns.flags & 0x8000) !== 0, options: m.edns.options.map((o) => o.code) } : null,
  };
}

function describeResponse(resp: DnsResponse | null): unknown {
  if (resp === null) return null;
  try {
    return describeMessage(resp.message);
  } catch (err) {
    return { malformed: (err as Error).message, wire: resp.toWire().toString("hex") };
  }
}

function shorthand(raw: unknown): unknown {
  if (raw === null || raw === undefined || raw === "") return {};
  if (typeof raw === "string") return { msg: raw.trim() };
  return raw;
}

export const debugPrint = definePlugin<DebugPrintArgs, "executor">({
  type: "debug_print",
  kind: "executor",
  feature: "core",
  summary: "Logs the request and the current response at debug level.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: { msg: { type: "string", minLength: 1, default: "debug print" } },
  },
  shorthand,
  quickSetup: (param) => param,
  create(args, ctx) {
    const log = ctx.log;
    const title = args.msg;
    return {
      execute(dns) {
        // Decoding costs; skip it entirely unless debug lines are being written.
        if (!log.isLevelEnabled("debug")) return Step.Next;
        log.debug({ client: dns.clientIp, protocol: dns.protocol, request: describeMessage(dns.query), response: describeResponse(dns.response) }, title);
        return Step.Next;
      },
    };
  },
});
