// `sluice check` on ipset and nftset args: each problem at its line and column, worded; the quick
// setups' tokens checked the same way. Nothing here needs the tools (check never runs them).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { runCli } from "../helpers/cli.js";
import { tempDir } from "../helpers/sluice.js";

function errorsOf(plugin: string): string {
  const dir = tempDir();
  writeFileSync(join(dir, "sluice.yaml"), `plugins:\n${plugin}`);
  return checkErrors(join(dir, "sluice.yaml"));
}

test.each([
  ["ipset without a set", "  - tag: s\n    type: ipset\n    args: { mask4: 16 }\n", "4:11: error: plugin 's': args: ipset needs set_name4 or set_name6 (or both)"],
  ["ipset mask4 out of range", "  - tag: s\n    type: ipset\n    args:\n      set_name4: v4\n      mask4: 33\n", "6:14: error: plugin 's': args.mask4: 'mask4' must be <= 32"],
  ["ipset name a restore line would split", '  - tag: s\n    type: ipset\n    args:\n      set_name4: "v4 -exist"\n', "5:18: error: plugin 's': args.set_name4: 'set_name4' must match pattern"],
  ["timeout neither 0, a duration nor ttl", "  - tag: s\n    type: ipset\n    args:\n      set_name4: v4\n      timeout: soon\n", "6:16: error: plugin 's': args.timeout: timeout 'soon' is neither 0, a duration (30m, 1h) nor ttl"],
  ["timeout not whole seconds", "  - tag: s\n    type: ipset\n    args:\n      set_name4: v4\n      timeout: 1500ms\n", "6:16: error: plugin 's': args.timeout: timeout must be whole seconds (kernel set timeouts are)"],
  ["min_timeout above max_timeout", "  - tag: s\n    type: ipset\n    args:\n      set_name6: v6\n      timeout: ttl\n      min_timeout: 2h\n      max_timeout: 1h\n", "7:20: error: plugin 's': args.min_timeout: min_timeout (7200s) is above max_timeout (3600s)"],
  ["batch_size over queue_size", "  - tag: s\n    type: ipset\n    args: { set_name4: v4, batch_size: 50, queue_size: 10 }\n", "4:40: error: plugin 's': args.batch_size: batch_size (50) is larger than queue_size (10)"],
  ["nftset without a target", "  - tag: n\n    type: nftset\n    args: { timeout: 1h }\n", "4:11: error: plugin 'n': args: nftset needs an IPv4 or an IPv6 target: ipv4 / ipv6, or table_family4, table_name4 and set_name4 (and the same with 6)"],
  ["nftset flat form half given", "  - tag: n\n    type: nftset\n    args:\n      table_family4: inet\n      set_name4: s4\n", "5:22: error: plugin 'n': args.table_family4: table_family4, table_name4, set_name4 go together: table_name4 missing"],
  ["nftset both forms", "  - tag: n\n    type: nftset\n    args:\n      ipv4: { table_family: inet, table_name: fw, set_name: s4 }\n      set_name4: s4\n", "6:18: error: plugin 'n': args.set_name4: ipv4 and the flat table_family4/table_name4/set_name4 are two forms of one target: give one"],
  ["nftset family", "  - tag: n\n    type: nftset\n    args:\n      ipv6: { table_family: inet4, table_name: fw, set_name: s6 }\n", "5:29: error: plugin 'n': args.ipv6.table_family: 'table_family' must be one of: ip, ip6, inet, bridge, netdev, arp"],
  ["nftset name nft could not read", "  - tag: n\n    type: nftset\n    args:\n      ipv4: { table_family: ip, table_name: fw, set_name: \"s4; flush ruleset\" }\n", "5:59: error: plugin 'n': args.ipv4.set_name: 'set_name' must match pattern"],
])("%s", (_name, plugin, want) => {
  const errors = errorsOf(plugin);
  expect(errors).toContain(`sluice.yaml:${want}`);
});

test.each([
  ["ipset", "ipset v4,inet4,24", "'v4,inet4,24': the family must be inet or inet6 (got 'inet4')"],
  ["ipset", "ipset v4,inet,40", "'v4,inet,40': the mask must be 1–32 (got '40')"],
  ["ipset", "ipset a,inet b,inet", "'b,inet': a second inet set (one set per family)"],
  ["nftset", "nftset inet,fw,s4,ipv4", "'inet,fw,s4,ipv4': the type must be ipv4_addr or ipv6_addr (got 'ipv4')"],
  ["nftset", "nftset inet,fw,s6,ipv6_addr,129", "'inet,fw,s6,ipv6_addr,129': the mask must be 1–128 (got '129')"],
  ["nftset", "nftset inet,fw", "'inet,fw' is not <family>,<table>,<set>,ipv4_addr|ipv6_addr[,<mask>]"],
])("quick setup %s: %s", (_type, exec, message) => {
  const errors = errorsOf(`  - tag: main\n    type: sequence\n    args:\n      - exec: ${exec}\n`);
  expect(errors).toMatch(/sluice\.yaml:5:15: error: plugin 'main': args\[0\]\.exec: /);
  expect(errors).toContain(message);
});

test("the real `sluice check` prints them located and exits 1; a valid file passes without running any tool", async () => {
  const dir = tempDir();
  writeFileSync(join(dir, "bad.yaml"), "plugins:\n  - tag: s\n    type: ipset\n    args:\n      set_name4: v4\n      mask6: 0\n");
  const bad = await runCli(["check", "-c", join(dir, "bad.yaml")]);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain("bad.yaml:6:14: error: plugin 's': args.mask6: 'mask6' must be >= 1");
  // ipset and nft need not be installed where the file is checked.
  writeFileSync(join(dir, "good.yaml"), "plugins:\n  - { tag: s, type: nftset, args: { command: /nonexistent/nft, ipv4: { table_family: inet, table_name: fw, set_name: s4 } } }\n");
  const good = await runCli(["check", "-c", join(dir, "good.yaml")]);
  expect([good.code, good.stderr]).toEqual([0, ""]);
});
