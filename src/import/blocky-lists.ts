// blocky's `blocking` (deny and allow list groups, clientGroupsBlock, blockType, blockTTL, loading) and
// the clients its per-client sections name, as Sluice providers, a `clients` provider and rules of `main`.

import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { isAbsolute, resolve } from "node:path";
import { goDurationSeconds, listLineToRule, listSource, slug } from "./blocky-values.js";
import { duration, isObj, strings, type Obj, type Output } from "./output.js";

/** The clients and address groups that blocky's per-client keys name, for `client` matchers. */
export class ClientBook {
  private readonly clients = new Map<string, { name: string; addresses: string[] }>();
  private readonly groups = new Map<string, string[]>();
  private hostnames: string | null = null;

  constructor(private readonly out: Output) {}

  /** clientLookup: names given to addresses, and the resolver asked for the names of the others. */
  lookup(value: unknown): void {
    const l = this.out.section("clientLookup", value, ["clients", "upstream", "singleNameOrder"]);
    if (isObj(l.clients)) {
      for (const [name, ips] of Object.entries(l.clients)) this.clients.set(name.toLowerCase(), { name: slug(name), addresses: strings(ips) });
    }
    if (l.upstream !== undefined) {
      const m = /^(?:(?:tcp\+udp|udp):)?(\d{1,3}(?:\.\d{1,3}){3})(?::(\d+))?$/.exec(typeof l.upstream === "string" ? l.upstream : "");
      if (m) {
        this.hostnames = `${m[1]}:${m[2] ?? "53"}`;
        this.out.note(`clientLookup.upstream: the names of seen clients are looked up at ${this.hostnames} (clients.hostnames); policy follows names declared under clients, not looked-up ones`);
      } else this.out.unsupportedKey("clientLookup.upstream", l.upstream, "a plain DNS address is needed");
    }
    if (l.singleNameOrder !== undefined) this.out.unsupportedKey("clientLookup.singleNameOrder", l.singleNameOrder, "names are not taken from reverse lookups");
  }

  /** The `client …` matcher for a per-client key (name, address or CIDR), or null when there is none. */
  matcher(path: string, key: string, value: unknown): string | null {
    const bare = key.trim();
    const [ip, bits] = bare.split("/");
    if (isIP(ip) !== 0 && (bits === undefined || /^\d{1,3}$/.test(bits))) {
      const name = `net-${slug(bare)}`;
      this.groups.set(name, [bare]);
      return `client ${name}`;
    }
    const known = this.clients.get(bare.toLowerCase());
    if (known) return `client ${known.name}`;
    this.out.unsupportedKey(path, value, "blocky matches names learned by reverse lookup and wildcards; name the client under clientLookup.clients or use its address or CIDR");
    return null;
  }

  /** The `clients` provider, when anything was named. */
  emit(): void {
    if (this.clients.size === 0 && this.groups.size === 0) return;
    this.out.add({
      tag: "clients",
      type: "clients",
      args: {
        clients: [...this.clients.values()].map((c) => ({ name: c.name, addresses: c.addresses })),
        groups: [...this.groups.entries()].map(([name, addresses]) => ({ name, addresses })),
        ...(this.hostnames !== null ? { hostnames: this.hostnames } : {}),
      },
    });
  }
}

interface Downloads {
  items: { url: string; dir: string; filename: string }[];
  providers: Set<string>;
}

/** Reads one group's sources into `rules/<group>-<side>.txt` (inline and local files) and download items (URLs). */
function groupFiles(out: Output, baseDir: string, side: "deny" | "allow", group: string, sources: unknown, dl: Downloads, key: string): string[] {
  const files: string[] = [];
  const local: string[] = [];
  const name = slug(group);
  for (const [i, raw] of strings(sources).entries()) {
    const src = listSource(raw);
    if (src.kind === "url") {
      const filename = `${name}-${side}-${i + 1}.txt`;
      dl.items.push({ url: src.url, dir: "lists", filename });
      dl.providers.add(`${side}_${name}`);
      files.push(`lists/${filename}`);
      continue;
    }
    let text: string;
    if (src.kind === "inline") text = src.text;
    else {
      try {
        text = readFileSync(isAbsolute(src.path) ? src.path : resolve(baseDir, src.path), "utf8");
      } catch (err) {
        out.unsupportedKey(`${key}.${group}[${i}]`, raw, `cannot read the file: ${(err as Error).message}`);
        continue;
      }
    }
    for (const line of text.split("\n")) {
      const rule = listLineToRule(line);
      if (rule !== null) local.push(rule);
    }
  }
  if (local.length > 0) {
    out.files[`rules/${name}-${side}.txt`] = local.join("\n") + "\n";
    files.push(`rules/${name}-${side}.txt`);
  }
  return files;
}

const BLOCKING_KEYS = [
  "denylists", "allowlists", "blackLists", "whiteLists", "clientGroupsBlock", "blockType", "blockTTL", "loading",
  "refreshPeriod", "downloadTimeout", "downloadAttempts", "downloadCooldown", "startStrategy", "failStartOnListError", "maxErrorsPerFile",
] as const;

/** The block answer: `black_hole` in the mode blockType says, TTL blockTTL (default 6h). */
function blockAnswer(out: Output, b: Obj): void {
  const type = typeof b.blockType === "string" ? b.blockType.trim() : "zeroIp";
  const ttl = b.blockTTL === undefined ? 21600 : goDurationSeconds(b.blockTTL);
  if (ttl === null) out.unsupportedKey("blocking.blockTTL", b.blockTTL, "not a duration");
  const args: Obj = { ttl: Math.max(0, Math.round(ttl ?? 21600)), short_circuit: true };
  if (/^zeroip$/i.test(type)) args.mode = "null";
  else if (/^nxdomain$/i.test(type)) args.mode = "nxdomain";
  else {
    const ips = type.split(",").map((s) => s.trim()).filter((s) => isIP(s) !== 0);
    if (ips.length === 0) {
      out.unsupportedKey("blocking.blockType", b.blockType, "neither zeroIp, nxDomain nor addresses: blocked names get 0.0.0.0");
      args.mode = "null";
    } else args.ips = ips;
  }
  if (args.mode === "null") out.note("blockType zeroIp: A gets 0.0.0.0 and AAAA ::, other types NODATA (blocky answers those NXDOMAIN)");
  out.add({ tag: "blocked", type: "black_hole", args: { ...args } });
}

/** Refresh of downloaded lists: one download plugin, one cron job every refreshPeriod (default 4h). */
function listRefresh(out: Output, b: Obj, dl: Downloads): void {
  const loading = out.section("blocking.loading", b.loading, ["refreshPeriod", "downloads", "strategy", "maxErrorsPerSource", "concurrency"]);
  const downloads = out.section("blocking.loading.downloads", loading.downloads, ["timeout", "attempts", "cooldown"]);
  for (const k of ["downloadAttempts", "downloadCooldown", "maxErrorsPerFile", "failStartOnListError"] as const) {
    if (b[k] !== undefined) out.unsupportedKey(`blocking.${k}`, b[k]);
  }
  for (const k of ["attempts", "cooldown"] as const) if (downloads[k] !== undefined) out.unsupportedKey(`blocking.loading.downloads.${k}`, downloads[k], "a failed download is tried again at the next refresh");
  if (loading.maxErrorsPerSource !== undefined) out.unsupportedKey("blocking.loading.maxErrorsPerSource", loading.maxErrorsPerSource, "unsupported lines are skipped and counted; a bad rule stops the load");
  if (loading.concurrency !== undefined) out.unsupportedKey("blocking.loading.concurrency", loading.concurrency, "downloads run one after the other");
  const strategy = loading.strategy ?? b.startStrategy;
  if (strategy !== undefined && strategy !== "blocking" && strategy !== "failOnError") {
    out.unsupportedKey(loading.strategy !== undefined ? "blocking.loading.strategy" : "blocking.startStrategy", strategy, "lists missing at start are fetched before serving (blocking)");
  }
  if (dl.items.length === 0) return;
  const timeout = goDurationSeconds(downloads.timeout ?? b.downloadTimeout ?? "60s");
  out.add({ tag: "fetch_lists", type: "download", args: { timeout: duration(timeout !== null && timeout > 0 ? timeout : 60), downloads: dl.items } });
  const period = goDurationSeconds(loading.refreshPeriod ?? b.refreshPeriod ?? "4h");
  if (period === null || period <= 0) {
    out.note("blocking refresh is off (refreshPeriod ≤ 0): lists are fetched when missing at start, and by POST /api/plugins/fetch_lists/download");
    return;
  }
  const reloads = [...dl.providers].map((p) => `$${p}`).join(" ");
  out.add({ tag: "refresh_lists", type: "cron", args: { jobs: [{ name: "lists", interval: duration(Math.max(1, period)), executors: ["$fetch_lists", `reload_provider ${reloads}`] }] } });
}

/** blocking: providers per list group in use, and a rule per client key (the default group for the rest). */
export function importBlocking(out: Output, book: ClientBook, value: unknown, baseDir: string): void {
  const b = out.section("blocking", value, BLOCKING_KEYS);
  const deny = isObj(b.denylists) ? b.denylists : isObj(b.blackLists) ? b.blackLists : {};
  const allow = isObj(b.allowlists) ? b.allowlists : isObj(b.whiteLists) ? b.whiteLists : {};
  const denyKey = isObj(b.denylists) ? "blocking.denylists" : "blocking.blackLists";
  const allowKey = isObj(b.allowlists) ? "blocking.allowlists" : "blocking.whiteLists";
  const assign = isObj(b.clientGroupsBlock) ? b.clientGroupsBlock : {};
  const groupsInUse = new Set(Object.values(assign).flatMap(strings));
  for (const g of new Set([...Object.keys(deny), ...Object.keys(allow)])) {
    if (!groupsInUse.has(g)) out.note(`list group '${g}' is in no clientGroupsBlock entry, so it blocks nothing (as in blocky): left out`);
  }
  const dl: Downloads = { items: [], providers: new Set() };
  const conditions = new Map<string, string[]>();
  for (const g of groupsInUse) {
    const name = slug(g);
    const denyFiles = groupFiles(out, baseDir, "deny", g, deny[g], dl, denyKey);
    const allowFiles = groupFiles(out, baseDir, "allow", g, allow[g], dl, allowKey);
    const cond: string[] = [];
    if (denyFiles.length > 0) {
      out.add({ tag: `deny_${name}`, type: "adguard_rule", args: { files: denyFiles } });
      cond.push(`qname $deny_${name}`);
    }
    if (allowFiles.length > 0) {
      out.add({ tag: `allow_${name}`, type: "adguard_rule", args: { files: allowFiles } });
      cond.push(`!qname $allow_${name}`);
      // A group with an allow list only lets nothing else through, as in blocky.
      if (denyFiles.length === 0) out.note(`list group '${g}' has only an allow list: every other name is blocked for its clients`);
    }
    if (cond.length > 0) conditions.set(g, cond);
    else out.note(`list group '${g}' has no list that could be read: it blocks nothing`);
  }
  const rules: { matches: string[]; exec: string }[] = [];
  const specific: string[] = [];
  for (const [key, groups] of Object.entries(assign)) {
    if (key === "default") continue;
    const who = book.matcher(`blocking.clientGroupsBlock.${key}`, key, groups);
    if (who === null) continue;
    specific.push(who.slice("client ".length));
    for (const g of strings(groups)) {
      const cond = conditions.get(g);
      if (cond) rules.push({ matches: [who, ...cond], exec: "$blocked" });
    }
  }
  for (const g of strings(assign.default)) {
    const cond = conditions.get(g);
    if (cond) rules.push({ matches: [...(specific.length > 0 ? [`!client ${specific.join(" ")}`] : []), ...cond], exec: "$blocked" });
  }
  if (rules.length > 0) {
    blockAnswer(out, b);
    out.main.push(...rules);
  } else {
    for (const k of ["blockType", "blockTTL"] as const) if (b[k] !== undefined) out.note(`blocking.${k}: nothing is blocked, so it is not used`);
  }
  listRefresh(out, b, dl);
}
