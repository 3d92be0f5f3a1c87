// `ipset`: adds the answer's addresses, masked to a prefix, to Linux ipsets (A → set_name4, AAAA →
// set_name6) with `ipset restore -exist`, in batches, from a bounded queue. See docs/plugins.md#ipset.

import { argProblems, ArgError, definePlugin, type ArgProblem } from "../../../registry/types.js";
import { setsControl } from "./control.js";
import { ipsetLines } from "./render.js";
import { mask4Schema, mask6Schema, quickMask, writerProperties, writerSettings, type WriterArgs } from "./settings.js";
import { resolveProgram } from "./tool.js";
import { createSetsPlugin, type SetsPlugin } from "./writer.js";

interface IpsetArgs extends WriterArgs {
  set_name4?: string;
  set_name6?: string;
  mask4: number;
  mask6: number;
}

/** ipset's names: at most 31 characters; none that a restore line would split or read as an option. */
const setName = { type: "string", pattern: "^[A-Za-z0-9_.:+][A-Za-z0-9_.:+-]{0,30}$" } as const;

/** `<name>,inet|inet6[,<mask>] …` */
function quickSetup(param: string): unknown {
  const tokens = param.split(/\s+/).filter((t) => t.length > 0);
  if (tokens.length === 0) throw new ArgError("expects one or two <set_name>,inet|inet6[,<mask>] tokens");
  const out: Record<string, string | number> = {};
  for (const token of tokens) {
    const [name, family, mask, ...extra] = token.split(",");
    if (extra.length > 0 || !name || family === undefined) throw new ArgError(`'${token}' is not <set_name>,inet|inet6[,<mask>]`);
    const f = family.toLowerCase();
    if (f !== "inet" && f !== "inet6") throw new ArgError(`'${token}': the family must be inet or inet6 (got '${family}')`);
    const v = f === "inet" ? "4" : "6";
    if (out[`set_name${v}`] !== undefined) throw new ArgError(`'${token}': a second ${f} set (one set per family)`);
    out[`set_name${v}`] = name;
    out[`mask${v}`] = quickMask(mask, v === "4" ? 4 : 6, v === "4" ? 24 : 32, token);
  }
  return out;
}

function checkArgs(args: IpsetArgs): ArgProblem[] {
  if (args.set_name4 === undefined && args.set_name6 === undefined) return [{ path: [], message: "ipset needs set_name4 or set_name6 (or both)" }];
  return argProblems(() => writerSettings(args));
}

export const ipset = definePlugin<IpsetArgs, "executor", SetsPlugin>({
  type: "ipset",
  kind: "executor",
  feature: "ipset",
  summary: "Adds the answer's addresses, masked to a prefix, to Linux ipsets (batched `ipset restore`, with an optional timeout).",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      set_name4: setName,
      set_name6: setName,
      mask4: { ...mask4Schema, default: 24 },
      mask6: { ...mask6Schema, default: 32 },
      ...writerProperties,
    },
  },
  quickSetup,
  check: checkArgs,
  control: setsControl("ipset"),
  create(args, ctx) {
    const problems = checkArgs(args);
    if (problems.length > 0) throw new ArgError(problems[0].message, problems[0].path);
    const settings = writerSettings(args);
    const argv = [...resolveProgram("ipset", "ipset", settings.command, (p) => ctx.resolvePath(p), "ipset"), "restore", "-exist"];
    const v4 = args.set_name4 === undefined ? null : { name: args.set_name4, mask: args.mask4 };
    const v6 = args.set_name6 === undefined ? null : { name: args.set_name6, mask: args.mask6 };
    return createSetsPlugin("ipset", settings, { mask4: v4?.mask ?? null, mask6: v6?.mask ?? null }, { argv, render: (batch) => ipsetLines(batch, v4, v6) }, ctx);
  },
});
