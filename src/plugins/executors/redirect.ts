// `redirect`: resolves a name as another one and answers with `CNAME original → target` ahead of the target's records.

import { FLAG, QCLASS, QTYPE, RCODE } from "../../dns/constants.js";
import { messageRcode, type Message, type ResourceRecord } from "../../dns/message.js";
import { checkName, normalizeName } from "../../dns/name.js";
import { nameRdata, readSoa } from "../../dns/rdata.js";
import type { DnsContext } from "../../engine/context.js";
import { DomainTableBuilder, type DomainTable } from "../../engine/rules/domain.js";
import { readRuleFile, splitFields } from "../../engine/rules/source.js";
import { isPromise, runNext, type Step, type StepResult } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin, type ArgProblem } from "../../registry/types.js";

interface RedirectArgs {
  rules: string[];
  files: string[];
}

/** Adds one `<domain_rule> <target>` line; an unprefixed rule is `full:`. Throws with a readable message. */
function addLine(fields: readonly string[], table: DomainTableBuilder<string>): void {
  if (fields.length !== 2) throw new Error(`'${fields.join(" ")}' must be exactly two fields: <domain_rule> <target_name>`);
  const [rule, raw] = fields;
  const target = normalizeName(raw);
  if (target.length === 0) throw new Error(`'${rule}': the target must not be the root`);
  const bad = checkName(target);
  if (bad !== null) throw new Error(`'${raw}' is not a domain name: ${bad}`);
  const full = /^full:/i.test(rule) ? rule.slice(5) : rule.includes(":") ? null : rule;
  if (full !== null && normalizeName(full) === target) throw new Error(`'${rule}' redirects to itself`);
  table.add(rule, target);
}

function addRules(args: RedirectArgs, table: DomainTableBuilder<string>): void {
  args.rules.forEach((line, i) => {
    try {
      addLine(splitFields(line), table);
    } catch (err) {
      throw new ArgError((err as Error).message, ["rules", i]);
    }
  });
}

/**
 * TTL of the synthetic CNAME: it should not outlive what it points at. The smallest TTL of the
 * target's answer records; for a negative answer its negative-caching TTL (RFC 2308: the smaller
 * of the SOA's TTL and MINIMUM); 0 when the answer carries neither (nothing in it is cacheable).
 */
function cnameTtl(m: Message): number {
  let ttl = -1;
  for (const rr of m.answers) if (ttl < 0 || rr.ttl < ttl) ttl = rr.ttl;
  if (ttl >= 0) return ttl;
  const soa = m.authorities.find((rr) => rr.type === QTYPE.SOA);
  return soa ? Math.min(soa.ttl, readSoa(soa.data).minimum) : 0;
}

export const redirect = definePlugin<RedirectArgs, "executor">({
  type: "redirect",
  kind: "executor",
  feature: "core",
  summary: "Resolves a name as another (<domain_rule> <target>) and answers with a CNAME chain.",
  dataFiles: (args) => args.files.map((path) => ({ path })),
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      rules: { type: "array", items: { type: "string" }, default: [] },
      files: { type: "array", items: { type: "string", minLength: 1 }, default: [] },
    },
  },
  shorthand: (raw) => (typeof raw === "string" ? { rules: [raw] } : Array.isArray(raw) ? { rules: raw } : (raw ?? {})),
  check(args) {
    const empty: ArgProblem[] = args.rules.length === 0 && args.files.length === 0 ? [{ path: [], message: "needs 'rules' or 'files'" }] : [];
    return [...empty, ...argProblems(() => addRules(args, new DomainTableBuilder<string>("full")))];
  },
  async create(args, ctx) {
    // Inline rules first, then files in order: a later definition of a pattern wins.
    const builder = new DomainTableBuilder<string>("full");
    addRules(args, builder);
    for (const [i, path] of args.files.entries()) {
      await readRuleFile(ctx.resolvePath(path), path, ["files", i], splitFields, (fields) => addLine(fields, builder));
    }
    const table: DomainTable<string> = builder.build();
    const redirected = ctx.services.metrics.counter("redirect_total", "Queries resolved under their redirect target", ["plugin_tag"])({ plugin_tag: ctx.tag });

    /** Puts the client's name back in the request (also on failure, so a SERVFAIL names the right question). */
    const restoreQuestion = (dns: DnsContext, original: string, target: string): void => {
      const q = dns.query.questions[0];
      if (q !== undefined && normalizeName(q.name) === target) q.name = original;
      dns.queryChanged();
    };

    /** Restores the name in the request and the response, and puts the CNAME first in the answers. */
    const restore = (dns: DnsContext, original: string, target: string, step: Step): Step => {
      restoreQuestion(dns, original, target);
      const resp = dns.response;
      if (resp === null) return step;
      const m = resp.edit();
      for (const rq of m.questions) if (normalizeName(rq.name) === target) rq.name = original;
      // RFC 6604: an NXDOMAIN after a CNAME is about the target; other failures carry no chain.
      const rcode = messageRcode(m);
      if (rcode !== RCODE.NOERROR && rcode !== RCODE.NXDOMAIN) return step;
      const cname: ResourceRecord = { name: original, type: QTYPE.CNAME, class: QCLASS.IN, ttl: cnameTtl(m), data: nameRdata(target) };
      m.answers.unshift(cname);
      // The synthetic CNAME is not validated data, so the answer can no longer claim AD (RFC 4035 §3.2.3).
      m.flags &= ~FLAG.AD;
      return step;
    };

    return {
      continuation: true,
      execute(dns, next) {
        const qs = dns.query.questions;
        if (qs.length === 0 || qs[0].class !== QCLASS.IN) return runNext(dns, next);
        const target = table.lookup(dns.qname);
        if (target === undefined || target === dns.qname) return runNext(dns, next);
        redirected.value++;
        const original = qs[0].name;
        qs[0].name = target;
        dns.queryChanged();
        let r: StepResult;
        try {
          r = runNext(dns, next);
        } catch (err) {
          restoreQuestion(dns, original, target);
          throw err;
        }
        if (!isPromise(r)) return restore(dns, original, target, r);
        return r.then(
          (step) => restore(dns, original, target, step),
          (err: unknown) => {
            restoreQuestion(dns, original, target);
            throw err;
          },
        );
      },
    };
  },
});
