// `qtype`: true when the question type is in the list (names such as AAAA, or numbers).

import { parseType } from "../../dns/constants.js";
import { definePlugin } from "../../registry/types.js";
import { enumListSchema, enumListShorthand, parseEnumList, type EnumListArgs } from "./enum-list.js";

export const qtypeMatcher = definePlugin<EnumListArgs, "matcher">({
  type: "qtype",
  kind: "matcher",
  feature: "core",
  summary: "Matches the question type.",
  schema: enumListSchema,
  shorthand: enumListShorthand,
  quickSetup: (param) => param,
  check: (args) => parseEnumList(args, parseType, "query type", 0xffff).problems,
  create(args) {
    const types = parseEnumList(args, parseType, "query type", 0xffff).values;
    return { match: (ctx) => types.has(ctx.qtype) };
  },
});
