// Pi-hole's gravity.db (read-only, with better-sqlite3): the subscribed lists (adlist, type 0 block /
// 1 allow), the hand-made domains (domainlist: 0 exact allow, 1 exact deny, 2 regex allow, 3 regex
// deny), the groups and the clients. The downloaded domains themselves (the gravity table) are not
// copied: the lists are downloaded again by the `download` plugin and refreshed by cron.

import Database from "better-sqlite3";
import { isIP } from "node:net";
import { sluiceName, type Draft } from "./draft.js";
import { ImportError } from "./types.js";

interface Adlist {
  id: number;
  address: string;
  enabled: number;
  type: number;
  comment: string | null;
}
interface DomainEntry {
  id: number;
  type: number;
  domain: string;
  enabled: number;
}
interface Group {
  id: number;
  name: string;
  enabled: number;
}
interface Client {
  id: number;
  ip: string;
  comment: string | null;
}

const MAC = /^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$/i;

/** Pi-hole's regex extensions (`;querytype=`, `;invert`, `;reply=`) have no equivalent. */
const REGEX_EXTENSION = /;(querytype|invert|reply)\b/;

function rows<T>(db: Database.Database, sql: string): T[] {
  try {
    return db.prepare(sql).all() as T[];
  } catch {
    return []; // a table (or a column) an older gravity.db has not
  }
}

export function importGravity(d: Draft, path: string, blocking: boolean): void {
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
    db.prepare("SELECT 1 FROM adlist LIMIT 1").get();
  } catch (err) {
    throw new ImportError(`${path}: not a Pi-hole gravity.db (${err instanceof Error ? err.message : String(err)})`);
  }
  try {
    const hasType = rows<{ name: string }>(db, "SELECT name FROM pragma_table_info('adlist')").some((c) => c.name === "type");
    const adlists = rows<Adlist>(db, `SELECT id, address, enabled, ${hasType ? "type" : "0 AS type"}, comment FROM adlist ORDER BY id`);
    const domains = rows<DomainEntry>(db, "SELECT id, type, domain, enabled FROM domainlist ORDER BY id");
    const groups = rows<Group>(db, 'SELECT id, name, enabled FROM "group" ORDER BY id');
    const clients = rows<Client>(db, "SELECT id, ip, comment FROM client ORDER BY id");
    const groupsOf = (table: string, column: string): Map<number, number[]> => {
      const map = new Map<number, number[]>();
      for (const r of rows<{ item: number; group_id: number }>(db, `SELECT ${column} AS item, group_id FROM ${table}`)) map.set(r.item, [...(map.get(r.item) ?? []), r.group_id]);
      return map;
    };
    const adlistGroups = groupsOf("adlist_by_group", "adlist_id");
    const domainGroups = groupsOf("domainlist_by_group", "domainlist_id");
    const clientGroups = groupsOf("client_by_group", "client_id");
    const groupName = new Map(groups.map((g) => [g.id, g.name]));
    const enabledGroups = new Set(groups.filter((g) => g.enabled !== 0).map((g) => g.id));
    /** Groups (other than Default) that have something enabled to block or allow. */
    const groupsWithLists = new Set<number>();
    const onlyOtherGroups = (what: string, gs: number[] | undefined): void => {
      const ids = gs ?? [0];
      for (const g of ids) groupsWithLists.add(g);
      if (!ids.includes(0)) d.unsupportedSetting(what, `groups ${ids.map((g) => groupName.get(g) ?? g).join(", ")}`, "lists of some groups only are applied to every client");
    };
    if (!blocking && adlists.length + domains.length > 0) d.note("blocking was off (dns.blocking.active false): the block lists and denied domains are not imported");

    for (const a of adlists) {
      const address = a.address.trim();
      const side = a.type === 1 ? "allow" : "block";
      if (a.enabled === 0) {
        d.note(`adlist '${address}' (${side}) is disabled in Pi-hole: not imported`);
        continue;
      }
      if (side === "block" && !blocking) continue;
      const source = address.startsWith("file://") ? address.slice("file://".length) : address;
      if (!/^https?:\/\//i.test(source) && !source.startsWith("/")) {
        d.unsupportedSetting("adlist.address", address, "neither an http(s) URL nor a local file");
        continue;
      }
      onlyOtherGroups(`adlist '${address}'`, adlistGroups.get(a.id));
      if (side === "block") d.addBlockList(source, "adblock", a.comment ?? address);
      else d.addAllowList(source, "adblock", a.comment ?? address);
    }

    const allow: string[] = [];
    const deny: string[] = [];
    for (const e of domains) {
      if (e.enabled === 0) continue;
      const regex = e.type === 2 || e.type === 3;
      const isAllow = e.type === 0 || e.type === 2;
      const what = `domainlist (${["exact allow", "exact deny", "regex allow", "regex deny"][e.type] ?? e.type}) '${e.domain}'`;
      if (!isAllow && !blocking) continue;
      let rule: string;
      if (regex) {
        if (REGEX_EXTENSION.test(e.domain)) {
          d.unsupportedSetting(what, e.domain, "Pi-hole's regex extensions (;querytype, ;invert, ;reply) are not supported");
          continue;
        }
        try {
          new RegExp(e.domain);
        } catch {
          d.unsupportedSetting(what, e.domain, "not a regular expression JavaScript reads");
          continue;
        }
        rule = `regexp:${e.domain}`;
      } else {
        if (!/^[a-z0-9_.-]+$/i.test(e.domain)) {
          d.unsupportedSetting(what, e.domain, "not a domain name (write internationalised names in punycode)");
          continue;
        }
        rule = `full:${e.domain.toLowerCase()}`;
      }
      onlyOtherGroups(what, domainGroups.get(e.id));
      (isAllow ? allow : deny).push(rule);
    }
    if (deny.length > 0) d.addBlockRules(deny, "domains");
    if (allow.length > 0) d.addAllowRules(allow, "domains");

    for (const g of groups) if (g.id !== 0 && g.enabled === 0) d.note(`group '${g.name}' is disabled in Pi-hole: its clients are not put in it`);
    for (const c of clients) {
      const id = c.ip.trim();
      const addresses: string[] = [];
      const macs: string[] = [];
      if (isIP(id) !== 0 || (id.includes("/") && isIP(id.split("/")[0] ?? "") !== 0)) addresses.push(id);
      else if (MAC.test(id)) macs.push(id);
      else {
        d.unsupportedSetting("client", id, "clients by interface (:eth0) or host name are not supported");
        continue;
      }
      const gs = (clientGroups.get(c.id) ?? [0]).filter((g) => enabledGroups.has(g) || g === 0);
      const hasLists = gs.some((g) => groupsWithLists.has(g)) || gs.includes(0);
      const name = c.comment !== null && c.comment.trim() !== "" ? c.comment : id;
      d.addClient({
        name,
        addresses,
        macs,
        groups: gs.filter((g) => g !== 0).map((g) => sluiceName(groupName.get(g) ?? `group-${g}`)),
        ...(hasLists ? {} : { blocking: false }),
      });
    }
  } finally {
    db.close();
  }
}
