// `has_wanted_ans`: true when the response's answer section holds a record of the question's type.

import { QTYPE } from "../../dns/constants.js";
import { SECTION_ANSWER } from "../../dns/view.js";
import { ArgError, definePlugin } from "../../registry/types.js";

export const hasWantedAnsMatcher = definePlugin<Record<string, never>, "matcher">({
  type: "has_wanted_ans",
  kind: "matcher",
  feature: "core",
  summary: "Matches when the response answers the question with a record of the asked type (not just a CNAME chain).",
  schema: { type: "object", additionalProperties: false, properties: {} },
  shorthand(raw) {
    if (raw !== undefined && raw !== null && raw !== "") throw new ArgError("has_wanted_ans takes no arguments");
    return {};
  },
  quickSetup: (param) => param,
  create: () => ({
    match(dns) {
      const resp = dns.response;
      if (resp === null || resp.answerCount === 0 || dns.query.questions.length === 0) return false;
      const wanted = dns.qtype;
      try {
        // Record types come from the structural index: no decode.
        const records = resp.index.records;
        for (let i = 0; i < records.length; i++) {
          const r = records[i];
          if (r.section !== SECTION_ANSWER) break;
          // An ANY question is answered by whatever records come back.
          if (r.type === wanted || wanted === QTYPE.ANY) return true;
        }
      } catch {
        return false; // a malformed response has no usable answer
      }
      return false;
    },
  }),
});
