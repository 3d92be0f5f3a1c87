// `rcode`: true when a response exists and its rcode is in the list (NXDOMAIN, SERVFAIL, ... or numbers).

import { parseRcode } from "../../dns/constants.js";
import { definePlugin } from "../../registry/types.js";
import { enumListSchema, enumListShorthand, parseEnumList, type EnumListArgs } from "./enum-list.js";

export const rcodeMatcher = definePlugin<EnumListArgs, "matcher">({
  type: "rcode",
  kind: "matcher",
  feature: "core",
  summary: "Matches the response code of the current response.",
  schema: enumListSchema,
  shorthand: enumListShorthand,
  quickSetup: (param) => param,
  check: (args) => parseEnumList(args, parseRcode, "response code", 0xfff).problems,
  create(args) {
    const rcodes = parseEnumList(args, parseRcode, "response code", 0xfff).values;
    return { match: (ctx) => ctx.response !== null && rcodes.has(ctx.response.rcode) };
  },
});
