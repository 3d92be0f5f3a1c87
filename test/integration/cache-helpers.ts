// Shared pieces of the cache tests: a counting upstream, a Sluice with a cache in front of
// `forward`, and in-process contexts for driving `execute` directly.

import { QTYPE } from "../../src/dns/constants.js";
import { replyTo, type Message } from "../../src/dns/message.js";
import { DnsResponse } from "../../src/dns/response.js";
import { soaRdata } from "../../src/dns/rdata.js";
import { DnsContext } from "../../src/engine/context.js";
import { isPromise, Step, type Continuation } from "../../src/engine/types.js";
import type { CacheExecutor } from "../../src/plugins/executors/cache/index.js";
import { answerWith, startResponder, type Reply, type Responder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An upstream that answers by `handler`, defaulting to one A record 192.0.2.1 with TTL 300. */
export async function upstream(handler?: (q: Message, via: "udp" | "tcp") => Reply | Promise<Reply>): Promise<Responder> {
  return startResponder(handler ?? ((q) => answerWith(q, ["192.0.2.1"], 300)));
}

/** How many queries for `name` (any letter case) the upstream has seen. */
export function asked(r: Responder, name: string): number {
  return r.seen.filter((s) => s.query.questions[0]?.name.toLowerCase() === name.toLowerCase()).length;
}

/** A Sluice whose `main` runs the cache `c`, then forwards when nothing answered, then `after` rules. */
export async function cacheSluice(cacheArgs: string, upstreamPort: number, after = "", clockShift?: { ms: number }): Promise<RunningSluice> {
  return startSluice(
    `plugins:
  - tag: c
    type: cache
    args: ${cacheArgs}
  - tag: main
    type: sequence
    args:
      - exec: $c
      - matches: "!has_resp"
        exec: forward 127.0.0.1:${upstreamPort}
${after}
${serversYaml()}`,
    {},
    { clockShift },
  );
}

export function cacheOf(s: RunningSluice, tag = "c"): CacheExecutor {
  const live = s.app.runtime.live(tag);
  if (!live) throw new Error(`no plugin '${tag}'`);
  return live.instance as CacheExecutor;
}

/** A negative answer, with an SOA whose record TTL and MINIMUM are given (no SOA when soaTtl is null). */
export function negative(q: Message, rcode: number, soaTtl: number | null, minimum = 300): Message {
  const reply = replyTo(q, rcode);
  if (soaTtl !== null) {
    reply.authorities = [
      {
        name: "example",
        type: QTYPE.SOA,
        class: 1,
        ttl: soaTtl,
        data: soaRdata({ mname: "ns.example", rname: "admin.example", serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum }),
      },
    ];
  }
  return reply;
}

/** A context for an A question as a server would build it (no wire form needed). */
export function queryContext(name: string, id = 1, type: number = QTYPE.A): DnsContext {
  const query: Message = { id, flags: 0x0100, questions: [{ name, type, class: 1 }], answers: [], authorities: [], additionals: [], edns: null };
  return new DnsContext(query, null, "127.0.0.1", 5353, "internal");
}

/** An in-process "rest of the sequence" that answers every question with `ip`, counting calls. */
export function localAnswer(ip = "192.0.2.7", ttl = 300): Continuation & { calls: number } {
  const next = ((ctx: DnsContext) => {
    next.calls++;
    ctx.response = DnsResponse.fromMessage(answerWith(ctx.query, [ip], ttl));
    return Step.Next;
  }) as Continuation & { calls: number };
  next.calls = 0;
  return next;
}

/** Value of one sample in the Prometheus text, or 0 when absent. */
export async function metric(s: RunningSluice, name: string, labels: Record<string, string>): Promise<number> {
  const text = await s.app.services.metrics.text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{")) continue;
    const inside = line.slice(name.length + 1, line.indexOf("}"));
    const parts = inside.split(",");
    if (want.every((w) => parts.includes(w)) && parts.length === want.length) return Number(line.slice(line.indexOf("}") + 1).trim());
  }
  return 0;
}

/** Runs the cache on a context whose rest of sequence is synchronous; the result is never a promise then. */
export function run(cache: CacheExecutor, ctx: DnsContext, next: Continuation): Step {
  const r = cache.execute(ctx, next);
  if (isPromise(r)) throw new Error("expected a synchronous result");
  return r;
}
