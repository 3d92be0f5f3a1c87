// `reverse_lookup`: remembers which name each answered address came from, and answers PTR queries for them.

import { QTYPE } from "../../dns/constants.js";
import { parseIP, unmapIPv4 } from "../../dns/ip.js";
import { replyTo } from "../../dns/message.js";
import { fqdn } from "../../dns/name.js";
import { nameRdata } from "../../dns/rdata.js";
import { DnsResponse } from "../../dns/response.js";
import { SECTION_ANSWER, type RecordSlot } from "../../dns/view.js";
import type { DnsContext } from "../../engine/context.js";
import { durationSchema, parseDuration } from "../../engine/duration.js";
import { reverseNameToIp } from "../../engine/rules/reverse-name.js";
import { isPromise, runNext, Step, type Continuation, type StepResult } from "../../engine/types.js";
import type { Cell } from "../../observability/metrics.js";
import { RouteError, textReply, type PluginRoute } from "../../registry/control.js";
import { argProblems, ArgError, definePlugin, type ExecutorPlugin } from "../../registry/types.js";

interface ReverseLookupArgs {
  size: number;
  /** Integer seconds or a duration string. */
  ttl: number | string;
  handle_ptr: boolean;
}

/** TTL of the PTR answers we synthesize: short, the mapping can change with the next answer. */
const PTR_TTL = 5;
const SWEEP_INTERVAL_MS = 30_000;

interface Entry {
  /** Question name, lower-case without trailing dot. */
  name: string;
  /** Monotonic ms. */
  expires: number;
}

/** IPv4 as its 4 bytes, IPv6 as its 16 bytes (IPv4-mapped IPv6 folded to IPv4), as a binary string key. */
function keyOf(bytes: Uint8Array): string {
  return Buffer.from(unmapIPv4(bytes)).toString("latin1");
}

/** Key of an A/AAAA record's data on the wire, with no intermediate copies for the common cases. */
function wireKey(wire: Buffer, start: number, end: number): string {
  if (end - start === 16) {
    // ::ffff:a.b.c.d is the same host as a.b.c.d.
    let mapped = wire[start + 10] === 0xff && wire[start + 11] === 0xff;
    for (let i = 0; mapped && i < 10; i++) mapped = wire[start + i] === 0;
    if (mapped) return wire.toString("latin1", start + 12, end);
  }
  return wire.toString("latin1", start, end);
}

/** A bounded map of address → name whose entries expire; Map order doubles as recency order. */
class NameCache {
  private readonly map = new Map<string, Entry>();

  constructor(
    private readonly size: number,
    private readonly entries: Cell,
  ) {}

  get(key: string, now: number): string | null {
    const e = this.map.get(key);
    if (e === undefined) return null;
    if (e.expires <= now) {
      this.map.delete(key);
      this.entries.value = this.map.size;
      return null;
    }
    // Refresh recency: reinsert at the end.
    this.map.delete(key);
    this.map.set(key, e);
    return e.name;
  }

  set(key: string, name: string, expires: number): void {
    const e = this.map.get(key);
    if (e !== undefined) {
      this.map.delete(key);
      e.name = name;
      e.expires = expires;
      this.map.set(key, e);
      return;
    }
    this.map.set(key, { name, expires });
    // Over the bound: drop the least recently used.
    if (this.map.size > this.size) {
      const oldest = this.map.keys().next();
      if (oldest.done !== true) this.map.delete(oldest.value);
    }
    this.entries.value = this.map.size;
  }

  sweep(now: number): void {
    for (const [key, e] of this.map) if (e.expires <= now) this.map.delete(key);
    this.entries.value = this.map.size;
  }
}

export interface ReverseLookupPlugin extends ExecutorPlugin {
  /** The name last seen answering with `ip` (FQDN with trailing dot), or null. Throws on text that is no IP. */
  lookup(ip: string): string | null;
}

function ttlSeconds(ttl: number | string): number {
  const seconds = Math.floor(parseDuration(ttl) / 1000);
  if (seconds < 1) throw new ArgError("ttl must be at least one second", ["ttl"]);
  return seconds;
}

const lookupRoute: PluginRoute<ReverseLookupPlugin> = {
  method: "GET",
  role: "viewer",
  path: "",
  summary: "The name last seen answering with an IP: text/plain FQDN with a trailing dot; empty body when unknown",
  invalidQuery: "invalid_ip",
  errors: ["invalid_ip"],
  schema: {
    querystring: { type: "object", required: ["ip"], properties: { ip: { type: "string", minLength: 1, maxLength: 64, description: "IPv4 or IPv6 address" } } },
    response: { 200: { type: "string" } },
  },
  handle(req, plugin) {
    const ip = String(req.query.ip);
    if (parseIP(ip.trim()) === null) throw new RouteError("invalid_ip", `'${ip}' is not an IP address`);
    return textReply(plugin.view.lookup(ip) ?? "");
  },
};

export const reverseLookup = definePlugin<ReverseLookupArgs, "executor", ReverseLookupPlugin>({
  type: "reverse_lookup",
  kind: "executor",
  feature: "core",
  summary: "Remembers address → name from answers (capping their TTL) and can answer PTR queries from that memory.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      size: { type: "integer", minimum: 1, maximum: 10_000_000, default: 65535 },
      ttl: { ...durationSchema, default: 7200 },
      handle_ptr: { type: "boolean", default: false },
    },
  },
  shorthand: (raw) => (raw === null || raw === undefined ? {} : raw),
  check: (args) =>
    argProblems(() => {
      try {
        return ttlSeconds(args.ttl);
      } catch (err) {
        if (err instanceof ArgError) throw err;
        throw new ArgError((err as Error).message, ["ttl"]);
      }
    }),
  control: { routes: [lookupRoute] },
  create(args, ctx): ReverseLookupPlugin {
    const maxTtl = ttlSeconds(args.ttl);
    const labels = { plugin_tag: ctx.tag };
    const m = ctx.services.metrics;
    const ptrHit = m.counter("reverse_lookup_ptr_hit_total", "reverse_lookup: PTR queries answered from memory", ["plugin_tag"])(labels);
    const ptrMiss = m.counter("reverse_lookup_ptr_miss_total", "reverse_lookup: PTR queries for addresses not in memory", ["plugin_tag"])(labels);
    const inserts = m.counter("reverse_lookup_cache_insert_total", "reverse_lookup: addresses remembered (new or refreshed)", ["plugin_tag"])(labels);
    const entries = m.gauge("reverse_lookup_cache_entries", "reverse_lookup: addresses currently remembered", ["plugin_tag"])(labels);
    entries.value = 0;
    const cache = new NameCache(args.size, entries);
    const sweeper = setInterval(() => cache.sweep(performance.now()), SWEEP_INTERVAL_MS);
    sweeper.unref();

    /** Answers a lone PTR question for a remembered address; false when it cannot. */
    const answerPtr = (dns: DnsContext): boolean => {
      const qs = dns.query.questions;
      if (qs.length !== 1 || qs[0].type !== QTYPE.PTR) return false;
      const ip = reverseNameToIp(dns.qname);
      if (ip === null) return false;
      const name = cache.get(keyOf(ip), performance.now());
      if (name === null) {
        ptrMiss.value++;
        return false;
      }
      ptrHit.value++;
      const reply = replyTo(dns.query);
      reply.answers.push({ name: qs[0].name, type: QTYPE.PTR, class: qs[0].class, ttl: PTR_TTL, data: nameRdata(name) });
      dns.response = DnsResponse.fromMessage(reply);
      return true;
    };

    /** Caps answer TTLs (copy-on-write of the wire, no decode) and remembers each address. */
    const observe = (dns: DnsContext): void => {
      let resp = dns.response;
      // Without a question there is no name to remember.
      if (resp === null || resp.answerCount === 0 || dns.query.questions.length === 0) return;
      let wire: Buffer;
      let records: readonly RecordSlot[];
      try {
        wire = resp.toWire();
        records = resp.index.records;
      } catch {
        return; // a malformed upstream answer is passed on untouched
      }
      const now = performance.now();
      let copied = false;
      for (let i = 0; i < records.length; i++) {
        const r = records[i];
        if (r.section !== SECTION_ANSWER) break;
        const data = r.fixed + 10;
        const len = r.end - data;
        if (!((r.type === QTYPE.A && len === 4) || (r.type === QTYPE.AAAA && len === 16))) continue;
        let ttl = wire.readUInt32BE(r.fixed + 4);
        if (ttl > maxTtl) {
          // The response's bytes may be shared (a cache's stored copy): patch a private copy.
          if (!copied) {
            wire = Buffer.from(wire);
            resp = DnsResponse.fromWire(wire);
            dns.response = resp;
            copied = true;
          }
          wire.writeUInt32BE(maxTtl, r.fixed + 4);
          ttl = maxTtl;
        }
        if (ttl === 0) continue;
        cache.set(wireKey(wire, data, r.end), dns.qname, now + ttl * 1000);
        inserts.value++;
      }
    };

    return {
      continuation: true,
      execute(dns: DnsContext, next: Continuation | null): StepResult {
        if (args.handle_ptr && answerPtr(dns)) return Step.Stop;
        const res = runNext(dns, next);
        if (isPromise(res)) {
          return res.then((step) => {
            observe(dns);
            return step;
          });
        }
        observe(dns);
        return res;
      },
      lookup(ip: string): string | null {
        const bytes = parseIP(ip.trim());
        if (bytes === null) throw new Error(`'${ip}' is not an IP address`);
        const name = cache.get(keyOf(bytes), performance.now());
        return name === null ? null : fqdn(name);
      },
      destroy() {
        clearInterval(sweeper);
      },
    };
  },
});
