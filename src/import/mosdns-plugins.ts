// mosdns v5 plugins as Sluice plugins. The plugin model is the same (tags, types, args, `sequence`
// rules with quick setups and `$tag` references), and so are most names and arguments; what differs
// is translated here, and what Sluice lacks is dropped (the sequence rules that use it commented out).

import { readFileSync } from "node:fs";
import { isAbsolute, normalize, resolve } from "node:path";
import type { Catalog } from "../registry/catalog.js";
import { isObj, strings, type Obj, type Output, type OutPlugin } from "./output.js";

/** Builtin exec words of a sequence rule (not plugin types). */
const BUILTINS = new Set(["accept", "reject", "return", "goto", "jump", "mark"]);

/** Forward upstream arguments Sluice has no equivalent of. */
const FORWARD_DROPPED = ["so_mark", "bind_to_device"];

export class MosdnsPlugins {
  /** Tags of plugins that are not carried over; rules and arguments naming them go too. */
  readonly dropped = new Set<string>();

  constructor(
    private readonly out: Output,
    private readonly catalog: Catalog,
    private readonly baseDir: string,
  ) {}

  private kindOf(type: string): string | null {
    const found = this.catalog.lookup(type);
    return "def" in found ? found.def.kind : null;
  }

  /** Copies a relative file the plugin reads into the output (it is read from the working directory there too). */
  copyFile(key: string, path: string): void {
    if (isAbsolute(path)) {
      this.out.note(`${key}: '${path}' is an absolute path: kept as it is`);
      return;
    }
    const rel = normalize(path);
    if (rel.startsWith("..")) {
      this.out.note(`${key}: '${path}' lies outside the configuration's directory: copy it to where -d points`);
      return;
    }
    try {
      this.out.files[rel] = readFileSync(resolve(this.baseDir, rel), "utf8");
    } catch (err) {
      this.out.note(`${key}: '${path}' could not be read (${(err as Error).message}): put it there before starting`);
    }
  }

  private copyFiles(p: OutPlugin, args: Obj, key = "files"): void {
    for (const f of strings(args[key])) this.copyFile(`${p.tag}.args.${key}`, f);
  }

  /** The Sluice plugin for one mosdns plugin, or null when it cannot be carried over. */
  translate(p: OutPlugin): OutPlugin | null {
    const kind = this.kindOf(p.type);
    if (kind === null || p.type === "sequence") return p.type === "sequence" ? p : this.drop(p, `type '${p.type}' has no equivalent here`);
    const args = isObj(p.args) ? { ...p.args } : p.args;
    if (!isObj(args)) return { ...p, args };
    switch (p.type) {
      case "forward":
        return this.forward(p, args);
      case "hosts":
      case "domain_set":
      case "ip_set":
      case "redirect":
      case "arbitrary":
        this.copyFiles(p, args);
        break;
      case "fallback":
        for (const k of ["primary", "secondary"] as const) {
          const tag = typeof args[k] === "string" ? args[k].replace(/^\$/, "") : "";
          if (this.dropped.has(tag)) return this.drop(p, `its ${k} '${tag}' is not carried over`);
        }
        break;
      case "udp_server":
      case "tcp_server": {
        const entry = typeof args.entry === "string" ? args.entry.replace(/^\$/, "") : "";
        if (this.dropped.has(entry)) return this.drop(p, `its entry '${entry}' is not carried over`);
        if (entry !== "") args.entry = entry;
        break;
      }
      case "http_server":
        if (Array.isArray(args.entries)) args.entries = args.entries.map((e: unknown) => (isObj(e) && typeof e.exec === "string" ? { ...e, exec: e.exec.replace(/^\$/, "") } : e));
        break;
      case "cache":
        if (typeof args.dump_file === "string") this.out.note(`${p.tag}: the cache dump '${args.dump_file}' is Sluice's own format; mosdns's dump is not read (the cache starts empty)`);
        break;
    }
    for (const k of ["sets"] as const) {
      if (!Array.isArray(args[k])) continue;
      const kept = strings(args[k]).filter((t) => !this.dropped.has(t.replace(/^\$/, "")));
      if (kept.length !== strings(args[k]).length) this.out.note(`${p.tag}: sets that were not carried over are left out`);
      args[k] = kept;
    }
    return { ...p, args };
  }

  private drop(p: OutPlugin, why: string): null {
    this.dropped.add(p.tag);
    this.out.unsupportedKey(`plugins[${p.tag}] (${p.type})`, p.args ?? null, why);
    return null;
  }

  private forward(p: OutPlugin, args: Obj): OutPlugin | null {
    const ups: Obj[] = [];
    for (const [i, raw] of (Array.isArray(args.upstreams) ? args.upstreams : []).entries()) {
      if (!isObj(raw)) continue;
      const u = { ...raw };
      const addr = typeof u.addr === "string" ? u.addr : "";
      if (/^(quic|doq|h3|udpme):\/\//i.test(addr)) {
        this.out.unsupportedKey(`${p.tag}.args.upstreams[${i}]`, addr, "DNS over QUIC and over HTTP/3 are not in this build");
        continue;
      }
      if (u.enable_http3 === true) this.out.unsupportedKey(`${p.tag}.args.upstreams[${i}].enable_http3`, true, "DNS over HTTPS goes over HTTP/2 here");
      delete u.enable_http3;
      for (const k of FORWARD_DROPPED) {
        if (u[k] === undefined) continue;
        if (u[k] !== false) this.out.unsupportedKey(`${p.tag}.args.upstreams[${i}].${k}`, u[k], "use an outbound profile's bind address (network.outbound)");
        delete u[k];
      }
      ups.push(u);
    }
    if (ups.length === 0) return this.drop(p, "no upstream this build can reach");
    return { ...p, args: { ...args, upstreams: ups } };
  }

  /** The dropped tag an expression names (`$tag`, `jump tag`, `goto tag`), or why its quick setup is unknown; null when fine. */
  private problem(expr: string, kind: "matcher" | "executor"): string | null {
    const text = expr.trim().replace(/^!\s*/, "");
    const [head, ...rest] = text.split(/\s+/);
    if (head.startsWith("$")) return this.dropped.has(head.slice(1)) ? `'${head.slice(1)}' is not carried over` : null;
    if (kind === "executor" && BUILTINS.has(head)) {
      const target = (head === "jump" || head === "goto") && rest[0] !== undefined ? rest[0].replace(/^\$/, "") : "";
      return this.dropped.has(target) ? `'${target}' is not carried over` : null;
    }
    const k = this.kindOf(head);
    if (k !== kind) return `'${head}' is not ${kind === "matcher" ? "a matcher" : "an executor"} here`;
    for (const token of rest) {
      if (token.startsWith("$") && this.dropped.has(token.slice(1))) return `'${token.slice(1)}' is not carried over`;
      if (token.startsWith("&")) this.copyFile(`quick setup '${text}'`, token.slice(1));
    }
    return null;
  }

  /** A sequence's rules; each rule that names what was dropped becomes a comment where it stood. */
  sequence(p: OutPlugin): OutPlugin {
    const rules = Array.isArray(p.args) ? (p.args as unknown[]) : [];
    const kept: unknown[] = [];
    for (const [i, rule] of rules.entries()) {
      if (!isObj(rule)) continue;
      const why =
        strings(rule.matches).map((m) => this.problem(m, "matcher")).find((x) => x !== null) ??
        (typeof rule.exec === "string" ? this.problem(rule.exec, "executor") : null);
      if (why === null || why === undefined) {
        kept.push(rule);
        continue;
      }
      const text = `${rule.matches !== undefined ? `matches: ${JSON.stringify(rule.matches)}, ` : ""}exec: ${JSON.stringify(rule.exec ?? null)}`;
      this.out.unsupportedKey(`plugins[${p.tag}].args[${i}]`, rule, why);
      this.out.ruleComments.push({ tag: p.tag, rule: kept.length, text: ` not imported (${why}): ${text}` });
    }
    return { ...p, args: kept };
  }
}
