// `query_summary` and `debug_print` seen in the log: one info summary per query; decoded messages at debug.
import { afterEach, expect, test } from "vitest";
import { replyTo } from "../../src/dns/message.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { answerWith, deadUdpPort, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const INFO = 30;
const DEBUG = 20;

async function sluice(yaml: string): Promise<RunningSluice> {
  const s = await startSluice(yaml);
  cleanups.push(() => s.stop());
  return s;
}

test("query_summary logs one info line per query with name, type, client, rcode and elapsed time", async () => {
  const up = await startResponder(async (q) => {
    await new Promise((r) => setTimeout(r, 40));
    return q.questions[0].name.startsWith("nx") ? replyTo(q, 3) : answerWith(q, ["2001:db8::1"]);
  });
  cleanups.push(() => up.close());
  const dead = await deadUdpPort();
  const s = await sluice(`plugins:
  - tag: summary
    type: query_summary
    args: { msg: "dns query" }
  - tag: main
    type: sequence
    args:
      - exec: $summary
      - { matches: "qname domain:dead.example", exec: "forward 127.0.0.1:${dead}" }
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`);
  await query(s.udpPort, "Host.Example", "AAAA");
  await query(s.udpPort, "nx.example", "A");
  expect(rcodeOf(await query(s.udpPort, "dead.example", "A"))).toBe(2);
  const lines = s.logs.filter((l) => l.msg === "dns query");
  expect(lines).toHaveLength(3);
  expect(lines.every((l) => l.level === INFO && l.target === "plugin:summary")).toBe(true);
  expect(lines[0]).toMatchObject({ qname: "host.example", qtype: "AAAA", client: "127.0.0.1", protocol: "udp", rcode: "NOERROR", answers: 1 });
  expect(lines[0].elapsed_ms).toBeGreaterThanOrEqual(35);
  expect(lines[1]).toMatchObject({ qname: "nx.example", qtype: "A", rcode: "NXDOMAIN", answers: 0 });
  expect(lines[2]).toMatchObject({ qname: "dead.example", rcode: null });
  expect(String(lines[2].error)).toContain("ECONNREFUSED");
});

test("query_summary quick setup and the default title", async () => {
  const s = await sluice(`plugins:
  - tag: plain
    type: query_summary
  - tag: main
    type: sequence
    args:
      - exec: $plain
      - exec: query_summary inner title
      - exec: reject 5
${serversYaml()}`);
  await query(s.udpPort, "x.example", "TXT");
  const plain = s.logs.filter((l) => l.msg === "query summary");
  const inner = s.logs.filter((l) => l.msg === "inner title");
  expect(plain).toHaveLength(1);
  expect(inner).toHaveLength(1);
  expect(plain[0]).toMatchObject({ qtype: "TXT", rcode: "REFUSED" });
});

test("debug_print logs the decoded request and the current response at debug level, not info", async () => {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.7"], 120));
  cleanups.push(() => up.close());
  const s = await sluice(`plugins:
  - tag: before
    type: debug_print
    args: before forward
  - tag: main
    type: sequence
    args:
      - exec: $before
      - exec: forward 127.0.0.1:${up.port}
      - exec: debug_print after forward
${serversYaml()}`);
  await query(s.udpPort, "Www.Example", "A", { edns: 1232 });
  const before = s.logs.find((l) => l.msg === "before forward");
  const after = s.logs.find((l) => l.msg === "after forward");
  expect(before?.level).toBe(DEBUG);
  expect(after?.level).toBe(DEBUG);
  expect(before?.response).toBeNull();
  expect(before?.request).toMatchObject({ opcode: "QUERY", flags: "rd", question: ["Www.Example. IN A"], edns: { udp: 1232, do: false } });
  expect(after?.response).toMatchObject({ rcode: "NOERROR", answer: ["Www.Example. 120 IN A 192.0.2.7"] });
  expect(String((after?.response as { flags: string }).flags)).toContain("qr");
  expect(s.logs.some((l) => l.level === INFO && (l.msg === "before forward" || l.msg === "after forward"))).toBe(false);
});
