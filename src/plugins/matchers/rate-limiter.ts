// `rate_limiter`: token bucket per client prefix; true while the client is within its rate (a token is taken).

import { parseIPv6, unmapIPv4, maskIP } from "../../dns/ip.js";
import { ArgError, definePlugin } from "../../registry/types.js";

interface RateLimiterArgs {
  qps: number;
  burst: number;
  mask4: number;
  mask6: number;
}

interface Bucket {
  tokens: number;
  /** Monotonic ms of the last refill. */
  last: number;
}

/** Buckets untouched this long are full again anyway, so they are dropped. */
const IDLE_MS = 5 * 60_000;
const SWEEP_INTERVAL_MS = 60_000;
/** Upper bound on tracked prefixes; beyond it, new prefixes share one overflow bucket. */
const MAX_BUCKETS = 65_536;

/** Dotted-quad IPv4 → u32 without allocating; -1 when the text is not plain IPv4. */
function ipv4Number(text: string): number {
  let value = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      part = part * 10 + (c - 0x30);
      if (++digits > 3 || part > 255) return -1;
    } else if (c === 0x2e && digits > 0 && dots < 3) {
      value = value * 256 + part;
      part = 0;
      digits = 0;
      dots++;
    } else return -1;
  }
  if (dots !== 3 || digits === 0) return -1;
  return value * 256 + part;
}

/** `<qps> [burst] [mask4] [mask6]`. */
function quickSetup(param: string): unknown {
  const tokens = param.split(/[\s,]+/).filter((t) => t.length > 0);
  const fields = ["qps", "burst", "mask4", "mask6"] as const;
  if (tokens.length > fields.length) throw new ArgError("expects at most: <qps> [burst] [mask4] [mask6]");
  const out: Record<string, number> = {};
  tokens.forEach((t, i) => {
    const n = Number(t);
    if (!/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(t) || !Number.isFinite(n)) throw new ArgError(`${fields[i]} '${t}' is not a number`);
    out[fields[i]] = n;
  });
  return out;
}

export const rateLimiterMatcher = definePlugin<RateLimiterArgs, "matcher">({
  type: "rate_limiter",
  kind: "matcher",
  feature: "core",
  summary: "Token bucket per client prefix: matches (and takes a token) while the client is within its rate.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      qps: { type: "number", exclusiveMinimum: 0, maximum: 1_000_000, default: 20 },
      // A bucket smaller than one token could never let a query through.
      burst: { type: "integer", minimum: 1, maximum: 1_000_000, default: 40 },
      mask4: { type: "integer", minimum: 0, maximum: 32, default: 32 },
      mask6: { type: "integer", minimum: 0, maximum: 128, default: 48 },
    },
  },
  shorthand: (raw) => (raw === null || raw === undefined || raw === "" ? {} : typeof raw === "string" ? quickSetup(raw) : raw),
  quickSetup,
  create(args, ctx) {
    const { burst, mask4, mask6 } = args;
    const perMs = args.qps / 1000;
    const mask4Bits = mask4 === 0 ? 0 : (0xffffffff << (32 - mask4)) >>> 0;
    const buckets = new Map<number | string, Bucket>();
    const overflow: Bucket = { tokens: burst, last: performance.now() };
    const labels = { plugin_tag: ctx.tag };
    const m = ctx.services.metrics;
    const allowed = m.counter("ratelimit_allowed_total", "rate_limiter: queries within the rate", ["plugin_tag"])(labels);
    const rejected = m.counter("ratelimit_rejected_total", "rate_limiter: queries over the rate", ["plugin_tag"])(labels);

    const keyOf = (ip: string): number | string | null => {
      const v4 = ipv4Number(ip);
      if (v4 >= 0) return (v4 & mask4Bits) >>> 0;
      const bytes = parseIPv6(ip);
      if (bytes === null) return null;
      const plain = unmapIPv4(bytes);
      if (plain.length === 4) return ((((plain[0] << 24) | (plain[1] << 16) | (plain[2] << 8) | plain[3]) >>> 0) & mask4Bits) >>> 0;
      return Buffer.from(maskIP(plain, mask6)).toString("latin1");
    };

    const take = (b: Bucket, now: number): boolean => {
      b.tokens = Math.min(burst, b.tokens + (now - b.last) * perMs);
      b.last = now;
      if (b.tokens < 1) return false;
      b.tokens -= 1;
      return true;
    };

    const sweeper = setInterval(() => {
      const cutoff = performance.now() - IDLE_MS;
      for (const [key, b] of buckets) if (b.last < cutoff) buckets.delete(key);
    }, SWEEP_INTERVAL_MS);
    sweeper.unref();

    return {
      match(dns) {
        const now = performance.now();
        const key = keyOf(dns.clientIp);
        // Internal queries (no client address) share the overflow bucket rather than going unlimited.
        let bucket = key === null ? overflow : buckets.get(key);
        if (bucket === undefined) {
          if (buckets.size < MAX_BUCKETS) {
            bucket = { tokens: burst, last: now };
            buckets.set(key as number | string, bucket);
          } else {
            bucket = overflow;
          }
        }
        const ok = take(bucket, now);
        if (ok) allowed.value++;
        else rejected.value++;
        return ok;
      },
      destroy() {
        clearInterval(sweeper);
      },
    };
  },
});
