// `qclass`: true when the question class is in the list (IN, CH, HS, or numbers).

import { parseClass } from "../../dns/constants.js";
import { definePlugin } from "../../registry/types.js";
import { enumListSchema, enumListShorthand, parseEnumList, type EnumListArgs } from "./enum-list.js";

export const qclassMatcher = definePlugin<EnumListArgs, "matcher">({
  type: "qclass",
  kind: "matcher",
  feature: "core",
  summary: "Matches the question class.",
  schema: enumListSchema,
  shorthand: enumListShorthand,
  quickSetup: (param) => param,
  check: (args) => parseEnumList(args, parseClass, "query class", 0xffff).problems,
  create(args) {
    const classes = parseEnumList(args, parseClass, "query class", 0xffff).values;
    return { match: (ctx) => classes.has(ctx.qclass) };
  },
});
