// `nftset`: adds the answer's addresses, masked to a prefix, to nftables sets (A → ipv4, AAAA → ipv6)
// with `nft -f -`, in batches, from a bounded queue. Targets are the structured `ipv4`/`ipv6` blocks
// or the reference engine's flat form (table_family4, table_name4, set_name4, mask4, and the same
// with 6). See docs/plugins.md#nftset.

import { argProblems, ArgError, definePlugin, type ArgProblem } from "../../../registry/types.js";
import { setsControl } from "./control.js";
import { nftScript, type NftSet, type Target } from "./render.js";
import { mask4Schema, mask6Schema, quickMask, writerProperties, writerSettings, type WriterArgs } from "./settings.js";
import { resolveProgram } from "./tool.js";
import { createSetsPlugin, type SetsPlugin } from "./writer.js";

interface TargetArgs {
  table_family: string;
  table_name: string;
  set_name: string;
  mask: number;
}

interface NftsetArgs extends WriterArgs {
  ipv4?: TargetArgs;
  ipv6?: TargetArgs;
  table_family4?: string;
  table_name4?: string;
  set_name4?: string;
  mask4: number;
  table_family6?: string;
  table_name6?: string;
  set_name6?: string;
  mask6: number;
}

const FAMILIES = ["ip", "ip6", "inet", "bridge", "netdev", "arp"];
const family = { type: "string", enum: FAMILIES } as const;
/** nft's identifiers (a name the script could not read as one is refused here, not at the first write). */
const nftName = { type: "string", pattern: "^[A-Za-z_][A-Za-z0-9_./-]{0,254}$" } as const;

const targetSchema = (mask: object, fallback: number): object => ({
  type: "object",
  additionalProperties: false,
  required: ["table_family", "table_name", "set_name"],
  properties: { table_family: family, table_name: nftName, set_name: nftName, mask: { ...mask, default: fallback } },
});

const FLAT = (v: 4 | 6): ["table_family4" | "table_family6", "table_name4" | "table_name6", "set_name4" | "set_name6"] =>
  v === 4 ? ["table_family4", "table_name4", "set_name4"] : ["table_family6", "table_name6", "set_name6"];

/** The set the family's addresses go to, or null; throws on a half-given or doubly given target. */
function targetOf(args: NftsetArgs, v: 4 | 6): Target<NftSet> | null {
  const structured = v === 4 ? args.ipv4 : args.ipv6;
  const keys = FLAT(v);
  const given = keys.filter((k) => args[k] !== undefined);
  if (structured !== undefined) {
    if (given.length > 0) throw new ArgError(`ipv${v} and the flat ${keys.join("/")} are two forms of one target: give one`, [given[0]]);
    return { name: { family: structured.table_family, table: structured.table_name, set: structured.set_name }, mask: structured.mask };
  }
  if (given.length === 0) return null;
  const missing = keys.filter((k) => args[k] === undefined);
  if (missing.length > 0) throw new ArgError(`${keys.join(", ")} go together: ${missing.join(" and ")} missing`, [given[0]]);
  const [f, t, s] = keys.map((k) => args[k] ?? "");
  return { name: { family: f, table: t, set: s }, mask: v === 4 ? args.mask4 : args.mask6 };
}

function targets(args: NftsetArgs): { v4: Target<NftSet> | null; v6: Target<NftSet> | null } {
  const v4 = targetOf(args, 4);
  const v6 = targetOf(args, 6);
  if (v4 === null && v6 === null) throw new ArgError("nftset needs an IPv4 or an IPv6 target: ipv4 / ipv6, or table_family4, table_name4 and set_name4 (and the same with 6)");
  return { v4, v6 };
}

/** `<family>,<table>,<set>,ipv4_addr|ipv6_addr[,<mask>] …` */
function quickSetup(param: string): unknown {
  const tokens = param.split(/\s+/).filter((t) => t.length > 0);
  if (tokens.length === 0) throw new ArgError("expects one or two <family>,<table>,<set>,ipv4_addr|ipv6_addr[,<mask>] tokens");
  const out: Record<string, TargetArgs> = {};
  for (const token of tokens) {
    const [fam, table, set, type, mask, ...extra] = token.split(",");
    if (extra.length > 0 || !fam || !table || !set || type === undefined) throw new ArgError(`'${token}' is not <family>,<table>,<set>,ipv4_addr|ipv6_addr[,<mask>]`);
    const t = type.toLowerCase();
    if (t !== "ipv4_addr" && t !== "ipv6_addr") throw new ArgError(`'${token}': the type must be ipv4_addr or ipv6_addr (got '${type}')`);
    const key = t === "ipv4_addr" ? "ipv4" : "ipv6";
    if (out[key] !== undefined) throw new ArgError(`'${token}': a second ${t} set (one set per family)`);
    out[key] = { table_family: fam, table_name: table, set_name: set, mask: quickMask(mask, key === "ipv4" ? 4 : 6, key === "ipv4" ? 24 : 48, token) };
  }
  return out;
}

function checkArgs(args: NftsetArgs): ArgProblem[] {
  const problems = argProblems(() => targets(args));
  return problems.length > 0 ? problems : argProblems(() => writerSettings(args));
}

export const nftset = definePlugin<NftsetArgs, "executor", SetsPlugin>({
  type: "nftset",
  kind: "executor",
  feature: "ipset",
  summary: "Adds the answer's addresses, masked to a prefix, to nftables sets (batched `nft -f -`, with an optional timeout).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      ipv4: targetSchema(mask4Schema, 24),
      ipv6: targetSchema(mask6Schema, 48),
      table_family4: family,
      table_name4: nftName,
      set_name4: nftName,
      mask4: { ...mask4Schema, default: 24 },
      table_family6: family,
      table_name6: nftName,
      set_name6: nftName,
      mask6: { ...mask6Schema, default: 48 },
      ...writerProperties,
    },
  },
  quickSetup,
  check: checkArgs,
  control: setsControl("nftset"),
  create(args, ctx) {
    const { v4, v6 } = targets(args);
    const settings = writerSettings(args);
    const argv = [...resolveProgram("nftset", "nft", settings.command, (p) => ctx.resolvePath(p), "nftables"), "-f", "-"];
    return createSetsPlugin("nftset", settings, { mask4: v4?.mask ?? null, mask6: v6?.mask ?? null }, { argv, render: (batch) => nftScript(batch, v4, v6) }, ctx);
  },
});
