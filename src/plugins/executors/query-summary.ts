// `query_summary`: logs one info line per query once the rest of the sequence has run.

import { rcodeName, typeName } from "../../dns/constants.js";
import type { DnsResponse } from "../../dns/response.js";
import type { DnsContext } from "../../engine/context.js";
import { isPromise, runNext, type Continuation, type StepResult } from "../../engine/types.js";
import { definePlugin } from "../../registry/types.js";

interface QuerySummaryArgs {
  msg: string;
}

/** A title as a string, `{msg}`, or nothing (the default title). */
function titleShorthand(raw: unknown): unknown {
  if (raw === null || raw === undefined || raw === "") return {};
  if (typeof raw === "string") return { msg: raw.trim() };
  return raw;
}

function rcodeText(resp: DnsResponse): string {
  try {
    return rcodeName(resp.rcode);
  } catch {
    return "malformed response";
  }
}

export const querySummary = definePlugin<QuerySummaryArgs, "executor">({
  type: "query_summary",
  kind: "executor",
  feature: "core",
  summary: "Logs one info line per query (name, type, client, rcode or error, elapsed) after the rest of the sequence.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: { msg: { type: "string", minLength: 1, default: "query summary" } },
  },
  shorthand: titleShorthand,
  quickSetup: (param) => param,
  create(args, ctx) {
    const log = ctx.log;
    const title = args.msg;
    // Logging every query is this plugin's purpose, so it (alone) logs at info on the query path.
    const summarise = (dns: DnsContext, error: unknown): void => {
      const resp = error === undefined ? dns.response : null;
      log.info(
        {
          qname: dns.qname,
          qtype: typeName(dns.qtype),
          client: dns.clientIp,
          protocol: dns.protocol,
          rcode: resp === null ? null : rcodeText(resp),
          answers: resp === null ? 0 : resp.answerCount,
          error: error === undefined ? undefined : error instanceof Error ? error.message : JSON.stringify(error),
          elapsed_ms: Math.round((performance.now() - dns.startedAt) * 10) / 10,
        },
        title,
      );
    };
    return {
      continuation: true,
      execute(dns: DnsContext, next: Continuation | null): StepResult {
        let res: StepResult;
        try {
          res = runNext(dns, next);
        } catch (err) {
          summarise(dns, err);
          throw err;
        }
        if (isPromise(res)) {
          return res.then(
            (step) => {
              summarise(dns, undefined);
              return step;
            },
            (err: unknown) => {
              summarise(dns, err);
              throw err;
            },
          );
        }
        summarise(dns, undefined);
        return res;
      },
    };
  },
});
