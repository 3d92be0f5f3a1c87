// `arbitrary`: answers from static zone-format records (inline snippets and zone files), matched exactly on name, type and class.

import { RCODE, typeName } from "../../dns/constants.js";
import type { ResourceRecord } from "../../dns/message.js";
import { normalizeName } from "../../dns/name.js";
import { recordBlock, type RecordBlock } from "../../dns/reply.js";
import { parseZone, parseZoneFile, ZoneError } from "../../dns/zone/index.js";
import type { DnsContext } from "../../engine/context.js";
import { Step } from "../../engine/types.js";
import { ArgError, definePlugin, type ArgProblem } from "../../registry/types.js";

interface ArbitraryArgs {
  rules: string[];
  files: string[];
  short_circuit: boolean;
}

/** Room left in a 64 KiB message once a header and question are written. */
const MAX_RRSET_BYTES = 65535 - 12 - 260;

/** Records by lower-case owner, then by type and class, so a lookup is two map reads. */
class RecordIndex {
  private readonly byName = new Map<string, Map<number, ResourceRecord[]>>();
  private readonly sizes = new Map<ResourceRecord[], number>();
  count = 0;

  add(rr: ResourceRecord): void {
    const key = normalizeName(rr.name);
    let byType = this.byName.get(key);
    if (!byType) {
      byType = new Map();
      this.byName.set(key, byType);
    }
    const typeClass = rr.type * 0x10000 + rr.class;
    let set = byType.get(typeClass);
    if (!set) {
      set = [];
      byType.set(typeClass, set);
    }
    // An RRset is a set: the same data twice is one record.
    if (set.some((r) => r.data.equals(rr.data))) return;
    set.push(rr);
    this.count++;
    const size = (this.sizes.get(set) ?? 0) + rr.name.length + 2 + 10 + rr.data.length;
    this.sizes.set(set, size);
    if (size > MAX_RRSET_BYTES) {
      throw new Error(`the ${typeName(rr.type)} records of '${rr.name}' do not fit in one DNS message`);
    }
  }

  find(lowerName: string, type: number, klass: number): readonly ResourceRecord[] | undefined {
    return this.byName.get(lowerName)?.get(type * 0x10000 + klass);
  }

  /** Every RRset in wire form, owned by the question name: what a query copies into its reply. */
  blocks(): Map<string, Map<number, RecordBlock>> {
    const out = new Map<string, Map<number, RecordBlock>>();
    for (const [name, byType] of this.byName) {
      const blocks = new Map<number, RecordBlock>();
      for (const [typeClass, set] of byType) blocks.set(typeClass, recordBlock(set));
      out.set(name, blocks);
    }
    return out;
  }
}

function checkRules(args: ArbitraryArgs): ArgProblem[] {
  const problems: ArgProblem[] = [];
  if (args.rules.length === 0 && args.files.length === 0) problems.push({ path: [], message: "needs records: give 'rules', 'files' or both" });
  args.rules.forEach((rule, i) => {
    try {
      parseZone(rule, { followIncludes: false });
    } catch (err) {
      if (err instanceof ZoneError) problems.push({ path: ["rules", i], message: err.message });
      else throw err;
    }
  });
  return problems;
}

export const arbitrary = definePlugin<ArbitraryArgs, "executor">({
  type: "arbitrary",
  kind: "executor",
  feature: "core",
  summary: "Answers from static zone-format records (inline rules and zone files).",
  dataFiles: (args) => args.files.map((path) => ({ path })),
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      rules: { type: "array", items: { type: "string" }, default: [] },
      files: { type: "array", items: { type: "string", minLength: 1 }, default: [] },
      short_circuit: { type: "boolean", default: false },
    },
  },
  check: (args) => checkRules(args),
  create(args, ctx) {
    const index = new RecordIndex();
    const addAll = (records: ResourceRecord[], path: (string | number)[]): void => {
      try {
        for (const rr of records) index.add(rr);
      } catch (err) {
        throw new ArgError((err as Error).message, path);
      }
    };
    const baseDir = ctx.resolvePath(".");
    args.rules.forEach((rule, i) => {
      try {
        addAll(parseZone(rule, { baseDir }), ["rules", i]);
      } catch (err) {
        if (err instanceof ZoneError) throw new ArgError(err.message, ["rules", i]);
        throw err;
      }
    });
    args.files.forEach((file, i) => {
      try {
        addAll(parseZoneFile(ctx.resolvePath(file), { source: file }), ["files", i]);
      } catch (err) {
        if (err instanceof ZoneError) throw new ArgError(err.message, ["files", i]);
        throw err;
      }
    });
    ctx.log.info({ records: index.count, rules: args.rules.length, files: args.files.length }, "arbitrary records loaded");
    const answered = ctx.services.metrics.counter("arbitrary_answer_total", "Responses built from arbitrary records", ["plugin_tag"])({ plugin_tag: ctx.tag });
    const done = args.short_circuit ? Step.Stop : Step.Next;

    const blocks = index.blocks();
    return {
      // Servers pass exactly one question; the answer owners point at it, so its spelling comes back.
      execute(dnsCtx: DnsContext) {
        const q = dnsCtx.query.questions[0];
        if (q === undefined) return Step.Next;
        const block = blocks.get(dnsCtx.qname)?.get(q.type * 0x10000 + q.class);
        if (block === undefined) return Step.Next;
        dnsCtx.reply(RCODE.NOERROR, block);
        answered.value++;
        return done;
      },
    };
  },
});
