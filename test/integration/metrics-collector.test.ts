// `metrics_collector` seen through the metrics scrape: totals, errors, in-flight, latency counters and histogram.
import { afterEach, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { answerWith, deadUdpPort, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function sample(text: string, series: string): number {
  const escaped = series.replace(/[{}+.]/g, "\\$&");
  return Number(new RegExp(`^${escaped} ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? NaN);
}

async function sluice(yaml: string): Promise<RunningSluice> {
  const s = await startSluice(yaml);
  cleanups.push(() => s.stop());
  return s;
}

test("answered, unanswered and failed queries are counted; latency goes to the histogram", async () => {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  const dead = await deadUdpPort();
  const s = await sluice(`plugins:
  - tag: mc
    type: metrics_collector
    args: { name: web }
  - tag: main
    type: sequence
    args:
      - exec: $mc
      - { matches: "qname domain:none.example", exec: return }
      - { matches: "qname domain:dead.example", exec: "forward 127.0.0.1:${dead}" }
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  for (let i = 0; i < 3; i++) expect(rcodeOf(await query(s.udpPort, `ok${i}.example`))).toBe(0);
  expect(rcodeOf(await query(s.udpPort, "none.example"))).toBe(0);
  expect(rcodeOf(await query(s.udpPort, "dead.example"))).toBe(2);
  const text = await s.app.services.metrics.text();
  const labels = 'plugin_tag="mc",name="web"';
  expect(sample(text, `query_total{${labels}}`)).toBe(5);
  expect(sample(text, `query_error_total{${labels}}`)).toBe(2);
  expect(sample(text, `query_inflight{${labels}}`)).toBe(0);
  expect(text).toContain("# TYPE query_duration_seconds histogram");
  expect(sample(text, `query_duration_seconds_count{${labels}}`)).toBe(3);
  expect(sample(text, `query_duration_seconds_bucket{le="+Inf",${labels}}`)).toBe(3);
  expect(sample(text, `query_duration_seconds_bucket{le="10",${labels}}`)).toBe(3);
  expect(sample(text, `query_duration_seconds_sum{${labels}}`)).toBeGreaterThan(0);
  // Local answers over loopback take well under a second.
  expect(sample(text, `query_duration_seconds_bucket{le="1",${labels}}`)).toBe(3);
});

test("string args and quick setup name the series; the default name is 'default'", async () => {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  const s = await sluice(`plugins:
  - tag: named
    type: metrics_collector
    args: api
  - tag: plain
    type: metrics_collector
  - tag: main
    type: sequence
    args:
      - exec: $named
      - exec: $plain
      - exec: metrics_collector inner
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  await query(s.udpPort, "a.example");
  await query(s.udpPort, "b.example");
  const text = await s.app.services.metrics.text();
  expect(sample(text, 'query_total{plugin_tag="named",name="api"}')).toBe(2);
  expect(sample(text, 'query_total{plugin_tag="plain",name="default"}')).toBe(2);
  expect(sample(text, 'query_total{plugin_tag="qs.exec.main.2.metrics_collector",name="inner"}')).toBe(2);
  expect(sample(text, 'query_duration_seconds_count{plugin_tag="qs.exec.main.2.metrics_collector",name="inner"}')).toBe(2);
});
