// `${key}` templates of the hook executors (http_request, script): a URL, a header, a body or an
// argument rendered from the query. A template is compiled once, at create, into literal parts and
// key indexes; a query only reads the keys a plugin uses (`capture`), and the text is joined from
// those values when it is sent (`render`), off the query's path for asynchronous hooks.
//
// Syntax: `${key}` (OxiDNS's form) or `{key}` (the short form) for a key of TEMPLATE_KEYS; `$$` is a
// literal `$`, `{{key}}` a literal `{key}`; any other `$` or `{` is literal. An unknown `${name}`, or
// a `${` without its `}`, is an error at check time. Config `${VAR}` expansion (src/config/expand.ts)
// leaves `${key}` of these names alone.

import { className, QTYPE, rcodeName, typeName } from "../dns/constants.js";
import { formatIP } from "../dns/ip.js";
import { SECTION_ANSWER } from "../dns/view.js";
import type { DnsContext } from "./context.js";
import { ArgError } from "./plugin-args.js";

/** Every key a template may name, in the order they are documented. */
export const TEMPLATE_KEYS = [
  "qname",
  "qtype",
  "qtype_name",
  "qclass",
  "qclass_name",
  "client_ip",
  "client_port",
  "server_name",
  "url_path",
  "marks",
  "has_resp",
  "rcode",
  "rcode_name",
  "resp_ip",
  "cron_plugin_tag",
  "cron_job_name",
  "cron_trigger_kind",
  "cron_scheduled_at_unix_ms",
] as const;
export type TemplateKey = (typeof TEMPLATE_KEYS)[number];

const KEY_SET: ReadonlySet<string> = new Set(TEMPLATE_KEYS);
export const isTemplateKey = (name: string): name is TemplateKey => KEY_SET.has(name);

/** The response's rcode, or null without a response (or with one too short to say). */
function rcodeOf(ctx: DnsContext): number | null {
  if (ctx.response === null) return null;
  try {
    return ctx.response.rcode;
  } catch {
    return null;
  }
}

/** Addresses of the answer section's A and AAAA records, in answer order (none when there is no answer or it does not parse). */
export function answerAddressTexts(ctx: DnsContext): string[] {
  const resp = ctx.response;
  if (resp === null || resp.answerCount === 0) return [];
  try {
    const wire = resp.toWire();
    const out: string[] = [];
    for (const r of resp.index.records) {
      if (r.section !== SECTION_ANSWER) break;
      const len = r.end - r.fixed - 10;
      if ((r.type === QTYPE.A && len === 4) || (r.type === QTYPE.AAAA && len === 16)) out.push(formatIP(wire.subarray(r.fixed + 10, r.end)));
    }
    return out;
  } catch {
    return [];
  }
}

/** The same, sorted, joined by commas (`resp_ip`). */
const respIps = (ctx: DnsContext): string => answerAddressTexts(ctx).sort().join(",");

const attr = (name: string) => (ctx: DnsContext): string => {
  const v = ctx.attrs?.get(name);
  return v === undefined ? "" : String(v);
};

/** How each key reads from a query: always a string ("" when the query has no such thing). */
const GETTERS: Record<TemplateKey, (ctx: DnsContext) => string> = {
  qname: (c) => c.qname,
  qtype: (c) => String(c.qtype),
  qtype_name: (c) => typeName(c.qtype),
  qclass: (c) => String(c.qclass),
  qclass_name: (c) => className(c.qclass),
  client_ip: (c) => c.clientIp,
  client_port: (c) => String(c.clientPort),
  // Sluice keeps no TLS server name or DoH path on a query; the keys exist so OxiDNS templates load.
  server_name: () => "",
  url_path: () => "",
  marks: (c) => (c.marks === null ? "" : c.marks.slice().sort((a, b) => a - b).join(",")),
  has_resp: (c) => (c.response === null ? "false" : "true"),
  rcode: (c) => {
    const r = rcodeOf(c);
    return r === null ? "" : String(r);
  },
  rcode_name: (c) => {
    const r = rcodeOf(c);
    return r === null ? "" : rcodeName(r);
  },
  resp_ip: respIps,
  cron_plugin_tag: attr("cron.plugin_tag"),
  cron_job_name: attr("cron.job_name"),
  cron_trigger_kind: attr("cron.trigger_kind"),
  cron_scheduled_at_unix_ms: attr("cron.scheduled_at_unix_ms"),
};

/** A compiled template: literal strings and indexes into its set's captured values. */
export interface Template {
  readonly parts: readonly (string | number)[];
  /** The whole text when the template names no key. */
  readonly constant: string | null;
}

const SHORT = /\{([a-z_]+)\}/y;
const SHORT_ESCAPED = /\{\{([a-z_]+)\}\}/y;

/** The templates of one plugin and the keys they use, read from a query in one `capture`. */
export class TemplateSet {
  private readonly used: TemplateKey[] = [];
  private getters: ((ctx: DnsContext) => string)[] = [];

  /** A set that captures every key (a script's environment and stdin carry them all). */
  static all(): TemplateSet {
    const s = new TemplateSet();
    for (const k of TEMPLATE_KEYS) s.index(k);
    return s;
  }

  /** The keys captured, in capture order. */
  get keys(): readonly TemplateKey[] {
    return this.used;
  }

  private index(key: TemplateKey): number {
    let i = this.used.indexOf(key);
    if (i < 0) {
      i = this.used.push(key) - 1;
      this.getters = this.used.map((k) => GETTERS[k]);
    }
    return i;
  }

  /** Compiles `text`; throws an ArgError at `path` for an unknown key or an unterminated `${`. */
  compile(text: string, path: (string | number)[] = []): Template {
    const parts: (string | number)[] = [];
    let literal = "";
    const key = (k: TemplateKey): void => {
      if (literal !== "") parts.push(literal);
      literal = "";
      parts.push(this.index(k));
    };
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === "$" && text[i + 1] === "$") {
        literal += "$";
        i += 2;
      } else if (c === "$" && text[i + 1] === "{") {
        const close = text.indexOf("}", i + 2);
        if (close < 0) throw new ArgError(`'\${' without its '}' in template '${text}'`, path);
        const name = text.slice(i + 2, close);
        if (!isTemplateKey(name)) throw new ArgError(`unknown template key '\${${name}}' (keys: ${TEMPLATE_KEYS.join(", ")}; write $$ for a literal $)`, path);
        key(name);
        i = close + 1;
      } else if (c === "{") {
        SHORT_ESCAPED.lastIndex = i;
        const escaped = SHORT_ESCAPED.exec(text);
        if (escaped && isTemplateKey(escaped[1])) {
          literal += `{${escaped[1]}}`;
          i += escaped[0].length;
          continue;
        }
        SHORT.lastIndex = i;
        const short = SHORT.exec(text);
        if (short && isTemplateKey(short[1])) {
          key(short[1]);
          i += short[0].length;
          continue;
        }
        literal += c;
        i++;
      } else {
        literal += c;
        i++;
      }
    }
    if (literal !== "" || parts.length === 0) parts.push(literal);
    return { parts, constant: parts.length === 1 && typeof parts[0] === "string" ? parts[0] : null };
  }

  /** The values of the used keys for this query (cheap: a few property reads; resp_ip walks the answer). */
  capture(ctx: DnsContext): string[] {
    const g = this.getters;
    const out = new Array<string>(g.length);
    for (let i = 0; i < g.length; i++) out[i] = g[i](ctx);
    return out;
  }
}

/** Joins a template's parts with the captured values, each value through `encode` when given. */
export function render(t: Template, values: readonly string[], encode?: (value: string) => string): string {
  if (t.constant !== null) return t.constant;
  let out = "";
  for (const p of t.parts) out += typeof p === "string" ? p : encode ? encode(values[p]) : values[p];
  return out;
}
