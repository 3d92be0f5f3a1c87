// Failed queries are counted, not logged one by one (issue 24, item 7): against a silent upstream,
// 30 queries at once are all answered SERVFAIL; the log has one line for the first and, when the
// period (log.failure_summary, 400ms here) ends, one summary line for the other 29; the metric counts
// all 30 by reason. A failure in a later period is logged at once again. A period out of bounds is
// refused with its key.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { metricValue } from "../helpers/proc.js";
import { startRawUpstream, type RawUpstream } from "../helpers/raw-upstream.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const config = (port: number, summary: string): string => `
log: { level: info, failure_summary: ${summary} }
api: { http: "127.0.0.1:0" }
plugins:
  - { tag: fwd, type: forward, args: { upstreams: [{ addr: "udp://127.0.0.1:${port}", timeout: 200ms }] } }
  - { tag: main, type: sequence, args: [{ exec: $fwd }] }
${serversYaml()}`;

let silent: RawUpstream;
let s: RunningSluice;
beforeAll(async () => {
  silent = await startRawUpstream({ udp: () => undefined });
  s = await startSluice(config(silent.port, "400ms"));
});
afterAll(async () => {
  await s.stop();
  await silent.close();
});

const firstLines = (): Record<string, unknown>[] => s.logs.filter((l) => typeof l.msg === "string" && l.msg === "query failed; answering SERVFAIL");
const summaries = (): Record<string, unknown>[] => s.logs.filter((l) => typeof l.msg === "string" && /more queries failed in the last/.test(l.msg));

async function until(what: string, fn: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("an outage: one line for the first failure, one summary for the rest of the period, every failure counted by reason", async () => {
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => query(s.udpPort, `down${i}.example`, "A", { timeoutMs: 3000 })));
  expect(answers.map(rcodeOf)).toEqual(Array.from({ length: 30 }, () => 2));
  expect(firstLines()).toHaveLength(1);
  expect(firstLines()[0]).toMatchObject({ level: 40, reason: "upstream_timeout", qtype: 1 });
  expect(String(firstLines()[0].qname)).toMatch(/^down\d+\.example\.?$/);
  await until("the summary", () => summaries().length === 1);
  expect(summaries()[0]).toMatchObject({ level: 40, failed: { upstream_timeout: 29 }, period_ms: 400 });
  expect(String(summaries()[0].msg)).toContain("29 more queries failed in the last 0.4s (upstream_timeout: 29)");
  const metrics = await (await s.api("/api/metrics")).text();
  expect(metricValue(metrics, "server_query_failures_total", 'plugin_tag="udp",reason="upstream_timeout"')).toBe(30);
  expect(metricValue(metrics, "server_failed_total", 'plugin_tag="udp",protocol="udp"')).toBe(30);

  // A new period: the next failure is logged at once, and a lone failure needs no summary.
  expect(rcodeOf(await query(s.udpPort, "again.example", "A", { timeoutMs: 3000 }))).toBe(2);
  expect(firstLines()).toHaveLength(2);
  expect(firstLines()[1]).toMatchObject({ qname: expect.stringMatching(/^again\.example\.?$/) as unknown });
  await new Promise((r) => setTimeout(r, 600));
  expect(summaries()).toHaveLength(1);
});

test("log.failure_summary out of bounds is refused, naming the key", async () => {
  const res = await s.api("/api/config/validate", { method: "POST", headers: { "content-type": "application/yaml" }, body: config(silent.port, "10ms") });
  expect(res.status).toBe(400);
  expect(await res.text()).toContain("log.failure_summary must be between 100ms and 1h");
});
