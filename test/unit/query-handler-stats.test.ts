// The server's request counters: each answered query is counted once, as completed (the pipeline
// ran to its end), controlled (ended early) or failed (an executor error or an answer that could
// not be encoded) — never as two of them.
import { expect, test } from "vitest";
import { replyTo } from "../../src/dns/message.js";
import { DnsResponse } from "../../src/dns/response.js";
import type { DnsContext } from "../../src/engine/context.js";
import { Step, type Executor } from "../../src/engine/types.js";
import { silentLogger } from "../../src/observability/logger.js";
import { MetricsHub } from "../../src/observability/metrics.js";
import { QueryHandler, serverStats } from "../../src/plugins/servers/handle.js";
import { buildQuery } from "../helpers/dns.js";
import { failureCounters, FailureLog } from "../../src/plugins/servers/failure-log.js";

/** An executor whose answer has a name no DNS message can carry, so encoding it throws. */
const unencodable = (step: Step): Executor => ({
  execute(ctx: DnsContext) {
    const reply = replyTo(ctx.query);
    reply.answers = [{ name: `${"a".repeat(63)}.`.repeat(5), type: 1, class: 1, ttl: 60, data: Buffer.from([192, 0, 2, 1]) }];
    ctx.response = DnsResponse.fromMessage(reply);
    return step;
  },
});

function counts(step: Step): { completed: number; controlled: number; failed: number; rcode: number } {
  const stats = serverStats(new MetricsHub({ processMetrics: false }), "t", "udp");
  const handler = new QueryHandler(unencodable(step), "udp", stats, new FailureLog(silentLogger(), failureCounters(new MetricsHub({ processMetrics: false }), "t"), 10_000), 1232);
  const wire = handler.handle(buildQuery("x.test", "A"), "127.0.0.1", 5353) as Buffer;
  return { completed: stats.completed.value, controlled: stats.controlled.value, failed: stats.failed.value, rcode: wire[3] & 0x0f };
}

test("an answer that cannot be encoded counts as failed only, whether the pipeline ran to its end or stopped early", () => {
  expect(counts(Step.Next)).toEqual({ completed: 0, controlled: 0, failed: 1, rcode: 2 });
  expect(counts(Step.Stop)).toEqual({ completed: 0, controlled: 0, failed: 1, rcode: 2 });
});
