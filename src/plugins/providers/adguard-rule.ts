// `adguard_rule`: a reloadable AdGuard DNS filter (inline rules and list files). A name is "in" the
// provider when its rules block it: `qname $ads` asks by name (rules limited by $dnstype are left
// out), `question $ads` asks with the query type, so $dnstype applies.

import type { Question } from "../../dns/message.js";
import { normalizeName } from "../../dns/name.js";
import type { AdguardIndex } from "../../engine/rules/adguard/index.js";
import { adguardInlineProblems, loadAdguardIndex, type AdguardArgs } from "../../engine/rules/adguard/load.js";
import type { Slicer } from "../../engine/rules/slicer.js";
import { definePlugin } from "../../registry/types.js";
import { ServingRules } from "./reload.js";

export const adguardRule = definePlugin<AdguardArgs, "provider">({
  type: "adguard_rule",
  kind: "provider",
  feature: "core",
  summary: "A reloadable AdGuard DNS filter list (||x^, @@ exceptions, $important, $badfilter, $denyallow, $dnstype, /regex/, hosts lines).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      rules: { type: "array", items: { type: "string" }, default: [] },
      files: { type: "array", items: { type: "string", minLength: 1 }, default: [] },
    },
  },
  check: (args) => adguardInlineProblems(args.rules),
  dataFiles: (args) => args.files.map((path) => ({ path })),
  async create(args, ctx) {
    const build = (slicer: Slicer): Promise<AdguardIndex> =>
      loadAdguardIndex(
        args,
        (p) => ctx.resolvePath(p),
        (r) => {
          ctx.log.warn(
            { source: r.source, skipped: r.count, first_line: r.first.line, first_rule: r.first.text, reason: r.first.reason },
            `adguard_rule: skipped ${r.count} unsupported rule(s) in ${r.source === "rules" ? "inline rules" : `'${r.source}'`} (browser-only syntax, $client/$ctag/$dnsrewrite or unknown modifiers); first at line ${r.first.line}: ${r.first.reason}`,
          );
        },
        slicer,
      );
    const snapshot = await ServingRules.load("adguard_rule", ctx, build);
    return {
      containsName(name: string): boolean {
        return snapshot.current.blocks(name, -1);
      },
      containsQuestion(q: Question): boolean {
        return snapshot.current.blocks(normalizeName(q.name), q.type);
      },
      reload: () => snapshot.reload(),
      get rules() {
        return snapshot.rules;
      },
    };
  },
});
