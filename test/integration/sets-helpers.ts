// Shared by the ipset and nftset tests: an upstream whose answers the test sets per name, a
// configuration with the plugin under test in front of it, and its counters.

import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { replyTo } from "../../src/dns/message.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";
import { metric } from "./cache-helpers.js";

export interface Zone {
  responder: Responder;
  /** name (lower case, no trailing dot) → the addresses answered and their TTL; other names are NXDOMAIN. */
  names: Map<string, { ips: string[]; ttl: number }>;
}

export async function startZone(): Promise<Zone> {
  const names = new Map<string, { ips: string[]; ttl: number }>();
  const responder = await startResponder((q) => {
    const hit = names.get(q.questions[0].name.toLowerCase().replace(/\.$/, ""));
    const wanted = q.questions[0].type === 28 ? (ip: string) => ip.includes(":") : (ip: string) => !ip.includes(":");
    return hit ? answerWith(q, hit.ips.filter(wanted), hit.ttl) : replyTo(q, 3);
  });
  return { responder, names };
}

/** `count` addresses in distinct /24s: 10.<block>.<i>.7 (the same `block` and `i` give the same address). */
export function distinct24s(block: number, count: number, from = 0): string[] {
  return Array.from({ length: count }, (_, i) => `10.${block}.${from + i}.7`);
}

/**
 * API, UDP and TCP servers, and `main`: forward to the zone, then `exec` (a `$tag` or a quick setup).
 * `plugin` is the YAML of the plugin under test (tag `sets`), when declared.
 */
export function setsYaml(zone: Zone, plugin: string, exec = "$sets"): string {
  return `api:
  http: 127.0.0.1:0
plugins:
${plugin}
  - tag: main
    type: sequence
    args:
      - exec: forward 127.0.0.1:${zone.responder.port}
      - exec: ${exec}
${serversYaml()}`;
}

export async function startSets(zone: Zone, plugin: string, opts: { exec?: string; clockShift?: { ms: number } } = {}): Promise<RunningSluice> {
  return startSluice(setsYaml(zone, plugin, opts.exec), {}, { clockShift: opts.clockShift });
}

export interface SetCounters {
  entries: number;
  dropped: number;
  writes: number;
  errors: number;
}

export async function counters(s: RunningSluice, type: "ipset" | "nftset", tag = "sets"): Promise<SetCounters> {
  const at = { plugin_tag: tag };
  return {
    entries: await metric(s, `${type}_entries_total`, at),
    dropped: await metric(s, `${type}_dropped_total`, at),
    writes: await metric(s, `${type}_write_total`, at),
    errors: await metric(s, `${type}_write_error_total`, at),
  };
}

export async function writeNow(s: RunningSluice, tag = "sets"): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await s.api(`/api/plugins/${tag}/write`, { method: "POST" });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
