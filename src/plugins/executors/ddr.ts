// `ddr`: answers `_dns.resolver.arpa` itself (RFC 9462, Discovery of Designated Resolvers), so the
// question never reaches an upstream (which would advertise the upstream's own encrypted resolvers,
// and clients would go there instead of to Sluice). SVCB queries get one record per DoT/DoH listener
// of this configuration (RFC 9461: alpn, port, dohpath, address hints), target `name`; any other type,
// or no such listener, or no `name`: NODATA with an SOA. Other names pass through untouched.

import { QCLASS, QTYPE, RCODE } from "../../dns/constants.js";
import { parseIP } from "../../dns/ip.js";
import { fqdn, checkName } from "../../dns/name.js";
import { DEFAULT_NEGATIVE_TTL, MAX_TTL, negativeSoaBlock } from "../../dns/negative.js";
import { alpnValue, SVC_KEY, svcbRdata } from "../../dns/rdata.js";
import { EMPTY_BLOCK, recordBlock, type RecordBlock } from "../../dns/reply.js";
import { Step } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin, type EncryptedEndpoint } from "../../registry/types.js";

/** The name DDR clients ask (lower case, no trailing dot, as DnsContext.qname has it). */
export const DDR_NAME = "_dns.resolver.arpa";

interface DdrArgs {
  name?: string;
  ttl: number;
}

/** `[name] [ttl=N]`: the quick setup and `args` as a string. */
function parseWords(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const word of text.split(/\s+/).filter((w) => w.length > 0)) {
    const ttl = /^ttl=(.*)$/.exec(word);
    if (ttl) out.ttl = /^\d{1,10}$/.test(ttl[1]) ? Number(ttl[1]) : ttl[1];
    else if (out.name === undefined) out.name = word;
    else throw new ArgError(`'${word}': ddr takes one name (and ttl=<seconds>)`);
  }
  return out;
}

function checkTarget(args: DdrArgs): void {
  if (args.name === undefined) return;
  const problem = checkName(args.name);
  if (problem !== null) throw new ArgError(problem, ["name"]);
  if (fqdn(args.name) === ".") throw new ArgError("needs a host name (the name on the certificate), not the root", ["name"]);
}

/** The SvcParams of one listener: alpn, port, the bound address as a hint when it is one address, dohpath. */
function svcParams(e: EncryptedEndpoint): Map<number, Uint8Array> {
  const params = new Map<number, Uint8Array>();
  params.set(SVC_KEY.alpn, alpnValue([e.protocol === "dot" ? "dot" : "h2"]));
  const port = Buffer.alloc(2);
  port.writeUInt16BE(e.port);
  params.set(SVC_KEY.port, port);
  const ip = parseIP(e.address);
  if (ip !== null && ip.some((b) => b !== 0)) params.set(ip.length === 4 ? SVC_KEY.ipv4hint : SVC_KEY.ipv6hint, ip);
  if (e.protocol === "doh") params.set(SVC_KEY.dohpath, Buffer.from(`${e.path ?? "/dns-query"}{?dns}`, "utf8"));
  return params;
}

/** One SVCB record per listener, priority 1, 2, ... in configuration order, owned by the question name. */
export function ddrBlock(endpoints: readonly EncryptedEndpoint[], target: string, ttl: number): RecordBlock {
  return recordBlock(endpoints.map((e, i) => ({ type: QTYPE.SVCB, ttl, data: svcbRdata(i + 1, fqdn(target), svcParams(e)) })));
}

export const ddr = definePlugin<DdrArgs, "executor">({
  type: "ddr",
  kind: "executor",
  feature: "core",
  summary: "Answers _dns.resolver.arpa (RFC 9462 DDR) itself: SVCB records for this configuration's DoT/DoH listeners, else NODATA.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      name: { type: "string", minLength: 1 },
      ttl: { type: "integer", minimum: 0, maximum: MAX_TTL, default: DEFAULT_NEGATIVE_TTL },
    },
  },
  shorthand(raw) {
    if (raw === null || raw === undefined) return {};
    return typeof raw === "string" ? parseWords(raw) : raw;
  },
  quickSetup: parseWords,
  check: (args) => argProblems(() => checkTarget(args)),
  create(args, ctx) {
    const nodata = negativeSoaBlock(args.ttl);
    const counter = ctx.services.metrics.counter("ddr_answer_total", "_dns.resolver.arpa queries answered by ddr", ["plugin_tag", "answer"]);
    const svcbHits = counter({ plugin_tag: ctx.tag, answer: "svcb" });
    const nodataHits = counter({ plugin_tag: ctx.tag, answer: "nodata" });
    const target = args.name;
    // Built on the first SVCB query once the servers have started (they are created after this executor).
    let records: RecordBlock | null = target === undefined ? EMPTY_BLOCK : null;
    const svcb = (): RecordBlock => {
      if (records !== null) return records;
      const endpoints = ctx.encryptedEndpoints();
      if (endpoints === null || target === undefined) return EMPTY_BLOCK;
      records = ddrBlock(endpoints, target, args.ttl);
      ctx.log.debug({ endpoints: endpoints.map((e) => `${e.tag} ${e.protocol} ${e.address}:${e.port}`) }, "ddr records built");
      return records;
    };
    return {
      execute(dns) {
        if (dns.qname !== DDR_NAME) return Step.Next;
        const q = dns.query.questions[0];
        if (q.class !== QCLASS.IN) return Step.Next;
        const block = q.type === QTYPE.SVCB ? svcb() : EMPTY_BLOCK;
        if (block.count > 0) {
          dns.reply(RCODE.NOERROR, block);
          svcbHits.value++;
        } else {
          dns.reply(RCODE.NOERROR, EMPTY_BLOCK, nodata);
          nodataHits.value++;
        }
        return Step.Stop;
      },
    };
  },
});
