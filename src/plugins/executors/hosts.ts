// `hosts`: answers A/AAAA queries from `<domain_rule> <ip> <ip> …` lines (inline and from files).

import { QTYPE, RCODE } from "../../dns/constants.js";
import { parseIP } from "../../dns/ip.js";
import { negativeSoaBlock } from "../../dns/negative.js";
import { EMPTY_BLOCK, recordBlock, type RecordBlock } from "../../dns/reply.js";
import { DomainTableBuilder, type DomainTable } from "../../engine/rules/domain.js";
import { readRuleFile, splitFields } from "../../engine/rules/source.js";
import { Step } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin, type ArgProblem } from "../../registry/types.js";

interface HostsArgs {
  entries: string[];
  files: string[];
  short_circuit: boolean;
}

/** Answer records in wire form, built once when the table is built. */
interface HostsEntry {
  v4Block: RecordBlock;
  v6Block: RecordBlock;
}

const ANSWER_TTL = 10;
const NODATA_SOA_TTL = 300;

/** Adds one `<rule> <ip>...` line; an unprefixed rule is `full:`. Throws with a readable message. */
function addLine(fields: readonly string[], table: DomainTableBuilder<HostsEntry>): void {
  const [rule, ...ips] = fields;
  if (ips.length === 0) throw new Error(`'${rule}' has no address (format: <domain_rule> <ip> [<ip> ...])`);
  const v4: Uint8Array[] = [];
  const v6: Uint8Array[] = [];
  for (const text of ips) {
    const ip = parseIP(text);
    if (!ip) throw new Error(`'${text}' is not an IP address`);
    (ip.length === 4 ? v4 : v6).push(ip);
  }
  const block = (list: Uint8Array[], type: number): RecordBlock => recordBlock(list.map((data) => ({ type, ttl: ANSWER_TTL, data })));
  table.add(rule, { v4Block: block(v4, QTYPE.A), v6Block: block(v6, QTYPE.AAAA) });
}

function addEntries(args: HostsArgs, table: DomainTableBuilder<HostsEntry>): void {
  args.entries.forEach((line, i) => {
    const fields = splitFields(line);
    if (fields.length === 0) throw new ArgError("empty entry", ["entries", i]);
    try {
      addLine(fields, table);
    } catch (err) {
      throw new ArgError((err as Error).message, ["entries", i]);
    }
  });
}

export const hosts = definePlugin<HostsArgs, "executor">({
  type: "hosts",
  kind: "executor",
  feature: "core",
  summary: "Answers A/AAAA queries from hosts-style lines: <domain_rule> <ip> <ip> ...",
  dataFiles: (args) => args.files.map((path) => ({ path })),
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      entries: { type: "array", items: { type: "string" }, default: [] },
      files: { type: "array", items: { type: "string", minLength: 1 }, default: [] },
      short_circuit: { type: "boolean", default: false },
    },
  },
  check(args) {
    const empty: ArgProblem[] = args.entries.length === 0 && args.files.length === 0 ? [{ path: [], message: "needs 'entries' or 'files'" }] : [];
    return [...empty, ...argProblems(() => addEntries(args, new DomainTableBuilder<HostsEntry>("full")))];
  },
  async create(args, ctx) {
    // Inline entries first, then files in order: a later definition of a pattern wins.
    const builder = new DomainTableBuilder<HostsEntry>("full");
    addEntries(args, builder);
    for (const [i, path] of args.files.entries()) {
      await readRuleFile(ctx.resolvePath(path), path, ["files", i], splitFields, (fields) => addLine(fields, builder));
    }
    const table: DomainTable<HostsEntry> = builder.build();
    const labels = { plugin_tag: ctx.tag };
    const hit = ctx.services.metrics.counter("hosts_hit_total", "A/AAAA queries answered by hosts (including NODATA)", ["plugin_tag"])(labels);
    const miss = ctx.services.metrics.counter("hosts_miss_total", "A/AAAA queries hosts had no entry for", ["plugin_tag"])(labels);
    const done = args.short_circuit ? Step.Stop : Step.Next;
    const nodataSoa = negativeSoaBlock(NODATA_SOA_TTL);
    return {
      execute(dns) {
        const qs = dns.query.questions;
        if (qs.length !== 1) return Step.Next;
        const q = qs[0];
        if (q.class !== 1 || (q.type !== QTYPE.A && q.type !== QTYPE.AAAA)) return Step.Next;
        const entry = table.lookup(dns.qname);
        if (entry === undefined) {
          miss.value++;
          return Step.Next;
        }
        hit.value++;
        const block = q.type === QTYPE.A ? entry.v4Block : entry.v6Block;
        // Known name without an address of this family: NODATA, with an SOA so clients cache it briefly.
        if (block.count === 0) dns.reply(RCODE.NOERROR, EMPTY_BLOCK, nodataSoa);
        else dns.reply(RCODE.NOERROR, block);
        return done;
      },
    };
  },
});
