// Bad args of ttl, drop_resp, redirect, prefer_ipv4/6, ecs_handler and forward_edns0opt are reported by
// `check` (before anything starts) with the field they concern; good short forms are accepted.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { checkConfig } from "../../src/app/app.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { tempDir } from "../helpers/sluice.js";

const dir = tempDir("sluice-rewrite-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The check error for a config, or "ok". */
function checkError(yaml: string): string {
  const path = join(dir, "check.yaml");
  writeFileSync(path, yaml);
  try {
    checkConfig(path, createCatalog());
  } catch (err) {
    return (err as Error).message;
  }
  return "ok";
}

/** A declared plugin used by a sequence. `args` is YAML flow text, or undefined for none. */
const declared = (type: string, args?: string): string => `
plugins:
  - tag: p
    type: ${type}
${args === undefined ? "" : `    args: ${args}\n`}  - tag: main
    type: sequence
    args: [{ exec: $p }]
`;

/** A quick-setup expression in a sequence. */
const quick = (expr: string): string => `
plugins:
  - tag: main
    type: sequence
    args: [{ exec: "${expr}" }]
`;

describe("ttl", () => {
  test("good forms", () => {
    for (const cfg of [declared("ttl", "300"), declared("ttl", '"60-600"'), declared("ttl", "{ min: 5 }"), quick("ttl 300"), quick("ttl 60-0")]) expect(checkError(cfg)).toBe("ok");
  });
  test("bad forms name the field", () => {
    expect(checkError(declared("ttl", "{ min: 600, max: 60 }"))).toMatch(/plugin 'p': args\.max: max \(60\) is below min \(600\)/);
    expect(checkError(declared("ttl", "{ fix: -1 }"))).toMatch(/args\.fix: 'fix' must be >= 0/);
    expect(checkError(declared("ttl", "{ fixed: 10 }"))).toMatch(/unknown field 'fixed'/);
    expect(checkError(declared("ttl", "{}"))).toMatch(/needs 'fix', or 'min' and\/or 'max'/);
    expect(checkError(quick("ttl 5m"))).toMatch(/'ttl 5m': '5m' is not a TTL: write '300' \(fixed\) or '60-600'/);
  });
});

describe("drop_resp", () => {
  test("takes nothing", () => {
    expect(checkError(quick("drop_resp"))).toBe("ok");
    expect(checkError(declared("drop_resp"))).toBe("ok");
    expect(checkError(quick("drop_resp now"))).toMatch(/drop_resp takes no parameter \(got 'now'\)/);
    expect(checkError(declared("drop_resp", "{ all: true }"))).toMatch(/unknown field 'all'/);
  });
});

describe("redirect", () => {
  test("bad rules name the rule index", () => {
    expect(checkError(declared("redirect", '{ rules: ["a.test b.test", "c.test"] }'))).toMatch(/args\.rules\[1\]: 'c\.test' must be exactly two fields: <domain_rule> <target_name>/);
    expect(checkError(declared("redirect", '{ rules: ["a.test b..test"] }'))).toMatch(/args\.rules\[0\]: 'b\.\.test' is not a domain name/);
    expect(checkError(declared("redirect", '{ rules: ["domian:a.test b.test"] }'))).toMatch(/args\.rules\[0\]: rule 'domian:a\.test' has an unknown kind 'domian:'/);
    expect(checkError(declared("redirect", '{ rules: ["full:A.test a.test."] }'))).toMatch(/'full:A\.test' redirects to itself/);
    expect(checkError(declared("redirect", '{ rules: ["a.test ."] }'))).toMatch(/the target must not be the root/);
    expect(checkError(declared("redirect", "{}"))).toMatch(/needs 'rules' or 'files'/);
  });
  test("has no quick-setup form", () => {
    expect(checkError(quick("redirect a.test b.test"))).toMatch(/'redirect' has no quick-setup form/);
  });
});

describe("prefer_ipv4 / prefer_ipv6", () => {
  test("good forms", () => {
    expect(checkError(quick("prefer_ipv4"))).toBe("ok");
    expect(checkError(declared("prefer_ipv6", "{ cache_ttl: 10m }"))).toBe("ok");
    expect(checkError(declared("prefer_ipv6", "{ cache: false, cache_ttl: 0 }"))).toBe("ok");
  });
  test("bad forms name the field", () => {
    expect(checkError(declared("prefer_ipv4", "{ cache_ttl: 0 }"))).toMatch(/args\.cache_ttl: cache_ttl must be greater than zero while cache is on/);
    expect(checkError(declared("prefer_ipv6", "{ cache_ttl: soon }"))).toMatch(/args\.cache_ttl: 'soon' is not a duration/);
    expect(checkError(declared("prefer_ipv4", "{ cache: yes please }"))).toMatch(/args\.cache: 'cache' must be boolean/);
    expect(checkError(quick("prefer_ipv6 always"))).toMatch(/prefer_ipv6 takes no parameter \(got 'always'\)/);
  });
});

describe("ecs_handler", () => {
  test("good forms", () => {
    for (const cfg of [quick("ecs_handler"), quick("ecs_handler 192.0.2.1"), quick("ecs_handler 2001:db8::/32"), declared("ecs_handler"), declared("ecs_handler", "{ send: true, mask4: 32, mask6: 64 }")]) {
      expect(checkError(cfg)).toBe("ok");
    }
  });
  test("bad forms name the field", () => {
    expect(checkError(declared("ecs_handler", "{ mask4: 33 }"))).toMatch(/args\.mask4: 'mask4' must be <= 32/);
    expect(checkError(declared("ecs_handler", "{ mask6: 129 }"))).toMatch(/args\.mask6: 'mask6' must be <= 128/);
    expect(checkError(declared("ecs_handler", '{ preset: "300.1.1.1" }'))).toMatch(/args\.preset: preset '300\.1\.1\.1' is not an IP address/);
    expect(checkError(quick("ecs_handler 192.0.2.1/33"))).toMatch(/preset '192\.0\.2\.1\/33': prefix length must be 0-32 for IPv4/);
    expect(checkError(quick("ecs_handler 2001:db8::/129"))).toMatch(/prefix length must be 0-128 for IPv6/);
  });
});

describe("forward_edns0opt", () => {
  test("good forms", () => {
    for (const cfg of [quick("forward_edns0opt 10,12"), quick("forward_edns0opt cookie padding"), declared("forward_edns0opt", '"10 12"'), declared("forward_edns0opt", "[10, nsid]")]) {
      expect(checkError(cfg)).toBe("ok");
    }
  });
  test("bad forms name the field", () => {
    expect(checkError(quick("forward_edns0opt 10,bogus"))).toMatch(/'bogus' is not an EDNS option code \(0-65535\) or name/);
    expect(checkError(declared("forward_edns0opt", "{ codes: [10, 70000] }"))).toMatch(/args\.codes\[1\]: item 1 must be <= 65535/);
    expect(checkError(declared("forward_edns0opt", "{ codes: [10, bogus] }"))).toMatch(/args\.codes\[1\]: 'bogus' is not an EDNS option code/);
    expect(checkError(declared("forward_edns0opt", "{ codes: [] }"))).toMatch(/args\.codes: needs at least one EDNS option code/);
    expect(checkError(declared("forward_edns0opt"))).toMatch(/args\.codes: needs at least one EDNS option code/);
  });
});
