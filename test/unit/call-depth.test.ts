// Call depth: the static check (registry/call-depth.ts) finds the rule where a jump/goto/$sequence
// chain passes MAX_CALL_DEPTH without recursing, and the engine fails a query that nests deeper at
// run time (chains built here from CompiledSequence objects, which no configuration check sees).
import { describe, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { decodeMessage } from "../../src/dns/message.js";
import { ConfigError, type Diagnostic } from "../../src/config/diagnostics.js";
import { loadConfigText } from "../../src/config/load.js";
import { DnsContext } from "../../src/engine/context.js";
import { builtinAction, CompiledSequence, executorAction, type CompiledRule } from "../../src/engine/sequence.js";
import { MAX_CALL_DEPTH, Step, type Executor } from "../../src/engine/types.js";
import { silentLogger } from "../../src/observability/logger.js";
import { MetricsHub } from "../../src/observability/metrics.js";
import { QueryHandler, serverStats } from "../../src/plugins/servers/handle.js";
import { analyzeConfig } from "../../src/registry/analyze.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { buildQuery } from "../helpers/dns.js";
import { failureCounters, FailureLog } from "../../src/plugins/servers/failure-log.js";

const catalog = createCatalog("full");

/** `n` sequences s0..s(n-1), each calling the next with `call` (the last answers), served by udp. */
function chainYaml(n: number, call = (next: string) => `jump ${next}`): string {
  let y = "plugins:\n";
  for (let i = 0; i < n; i++) y += `  - tag: s${i}\n    type: sequence\n    args:\n      - exec: ${i < n - 1 ? call(`s${i + 1}`) : "reject 3"}\n`;
  return `${y}  - { tag: udp, type: udp_server, args: { entry: s0, listen: "127.0.0.1:0" } }\n`;
}

function problems(yaml: string): Diagnostic[] {
  try {
    analyzeConfig(loadConfigText(yaml), catalog);
  } catch (err) {
    if (err instanceof ConfigError) return err.diagnostics;
    throw err;
  }
  return [];
}

describe("static call depth", () => {
  test("a 7 000-deep jump chain is refused at the rule that passes the limit, naming the chain's start", () => {
    const d = problems(chainYaml(7000));
    expect(d).toHaveLength(1);
    // s63 (the 64th sequence) is declared on lines 2 + 4*63; its exec value starts at column 15.
    expect(d[0]).toMatchObject({ line: 2 + 4 * 63 + 3, column: 15 });
    expect(d[0].message).toContain(`plugin 's63': args[0].exec: calling 's64' here nests ${MAX_CALL_DEPTH + 1} calls deep`);
    expect(d[0].message).toContain("the chain starting at 's0' is 7000 deep");
  });

  test("exactly MAX_CALL_DEPTH sequences pass; one more does not (goto and $tag count like jump)", () => {
    expect(problems(chainYaml(MAX_CALL_DEPTH))).toEqual([]);
    expect(problems(chainYaml(MAX_CALL_DEPTH, (t) => `$${t}`))).toEqual([]);
    expect(problems(chainYaml(MAX_CALL_DEPTH + 1, (t) => `goto ${t}`))[0].message).toMatch(/past the maximum call depth of 64/);
    expect(problems(chainYaml(MAX_CALL_DEPTH + 1, (t) => `$${t}`))[0].message).toMatch(/past the maximum call depth of 64/);
  });

  test("fallback branches count as a level", () => {
    let y = chainYaml(MAX_CALL_DEPTH - 1).replace("exec: reject 3", "exec: $fb");
    y += "  - { tag: fb, type: fallback, args: { primary: leaf, secondary: leaf2 } }\n";
    y += "  - { tag: leaf, type: sequence, args: [{ exec: reject 3 }] }\n  - { tag: leaf2, type: black_hole, args: 10.0.0.1 }\n";
    expect(problems(y)[0]?.message).toMatch(/plugin 'fb': args\.primary: calling 'leaf' here nests 65 calls deep/);
  });

  test("a 7 000-long dependency cycle is reported without overflowing the stack, with a short message", () => {
    const y = chainYaml(7000).replace("exec: reject 3", "exec: jump s0");
    const d = problems(y);
    expect(d[0].message).toMatch(/^plugin 's0': dependency cycle: s0 -> s1 -> s2 -> s3 -> s4 -> \.\.\. \(6994 more\) -> s6999 -> s0$/);
  });
});

// ---- run time -------------------------------------------------------------------------------

/** An executor that answers later, as forwarding does. */
const later: Executor = { execute: () => new Promise<typeof Step.Next>((r) => setTimeout(() => r(Step.Next), 1)) };
const answer = (rcode: number): CompiledRule => ({ matchers: [], action: builtinAction({ builtin: "reject", rcode, soaTtl: null }, null), continuation: false, kind: "builtin", tag: "reject" });
const jump = (target: Executor): CompiledRule => ({ matchers: [], action: builtinAction({ builtin: "jump", target: "x" }, target), continuation: false, kind: "builtin", tag: "jump" });
const call = (target: Executor): CompiledRule => ({ matchers: [], action: executorAction(target), continuation: false, kind: "executor", tag: "x" });

/** `n` sequences, each (optionally after an async step) jumping to the next; the last answers NXDOMAIN. */
function chain(n: number, async = false): CompiledSequence {
  let seq = new CompiledSequence(`s${n - 1}`, [answer(RCODE.NXDOMAIN)]);
  for (let i = n - 2; i >= 0; i--) seq = new CompiledSequence(`s${i}`, async ? [call(later), jump(seq)] : [jump(seq)]);
  return seq;
}

async function rcode(entry: Executor): Promise<number> {
  const handler = new QueryHandler(entry, "udp", serverStats(new MetricsHub({ processMetrics: false }), "t", "udp"), new FailureLog(silentLogger(), failureCounters(new MetricsHub({ processMetrics: false }), "t"), 10_000), 1232);
  const wire = await handler.handle(buildQuery("depth.test", "A"), "127.0.0.1", 5353);
  return decodeMessage(wire as Buffer).flags & 0xf;
}

describe("run-time call depth", () => {
  test("a 5 000-deep chain the static check never saw answers SERVFAIL, no RangeError", async () => {
    let caught: unknown = null;
    const entry = chain(5000);
    const ctx = new DnsContext(decodeMessage(buildQuery("depth.test", "A")), null, "127.0.0.1", 5353, "udp");
    try {
      void entry.execute(ctx);
    } catch (err) {
      caught = err;
    }
    expect((caught as Error).name).toBe("CallDepthError");
    expect(ctx.callDepth).toBe(0);
    expect(await rcode(entry)).toBe(RCODE.SERVFAIL);
    expect(await rcode(chain(5000, true))).toBe(RCODE.SERVFAIL);
  });

  test("exactly MAX_CALL_DEPTH nested sequences answer, sync and async; one more fails", async () => {
    expect(await rcode(chain(MAX_CALL_DEPTH))).toBe(RCODE.NXDOMAIN);
    expect(await rcode(chain(MAX_CALL_DEPTH, true))).toBe(RCODE.NXDOMAIN);
    expect(await rcode(chain(MAX_CALL_DEPTH + 1))).toBe(RCODE.SERVFAIL);
    expect(await rcode(chain(MAX_CALL_DEPTH + 1, true))).toBe(RCODE.SERVFAIL);
  });

  test("calls made one after another do not add up, even when each went async", async () => {
    // 200 children called in turn from one sequence: depth 2 each time, never 201.
    const child = new CompiledSequence("child", [call(later)]);
    const rules: CompiledRule[] = [];
    for (let i = 0; i < 200; i++) rules.push(i % 2 === 0 ? jump(child) : call(child));
    rules.push(answer(RCODE.NXDOMAIN));
    expect(await rcode(new CompiledSequence("root", rules))).toBe(RCODE.NXDOMAIN);
    // The same inside a chain that is already MAX_CALL_DEPTH - 2 deep.
    let seq = new CompiledSequence("inner", rules);
    for (let i = 0; i < MAX_CALL_DEPTH - 2; i++) seq = new CompiledSequence(`w${i}`, [jump(seq)]);
    expect(await rcode(seq)).toBe(RCODE.NXDOMAIN);
  });
});
