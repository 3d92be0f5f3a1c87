// Attack (issue 9, item 7): a YAML alias bomb and a 7 000-deep chain of `jump` sequences used to
// get 500 (validate: internal_error, save: config_save_failed, `sluice check`: a stack overflow).
// Now: 400 yaml_alias_limit, and call depth is an ordinary located diagnostic. The program runs
// in-process here (so the validation worker is reached from the TypeScript sources) and as `sluice check`.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RCODE } from "../../src/dns/constants.js";
import { WORKER_FILE } from "../../src/app/validate-pool.js";
import { MAX_CALL_DEPTH } from "../../src/engine/types.js";
import { runCli } from "../helpers/cli.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { apiYaml, startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

/** Nine levels of nine aliases: 9^9 strings once expanded (the "billion laughs"). */
const BOMB = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
plugins: []
`;
/** Where the yaml library stops counting: the first `*c` (line 4, column 8). */
const BOMB_AT = { line: 4, column: 8 };

/** `n` sequences s0..s(n-1) jumping down the chain; the last answers NXDOMAIN; udp serves s0. */
function chain(n: number): string {
  let y = "plugins:\n";
  for (let i = 0; i < n; i++) y += `  - tag: s${i}\n    type: sequence\n    args:\n      - exec: ${i < n - 1 ? `jump s${i + 1}` : "reject 3"}\n`;
  return `${y}  - { tag: udp, type: udp_server, args: { entry: s0, listen: "127.0.0.1:0" } }\n`;
}
/** The rule in s63 that calls s64: line 2 + 4 * 63 + 3, its value at column 15. */
const CHAIN_AT = { line: 2 + 4 * 63 + 3, column: 15 };

interface ErrorBody {
  code: string;
  message: string;
  diagnostics?: string[];
  diagnostic_details?: { line: number; column: number; message: string }[];
}

let s: RunningSluice;
const dir = tempDir("sluice-complexity-");
beforeAll(async () => {
  s = await startSluice(apiYaml("black_hole 10.0.0.1"));
});
afterAll(async () => {
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

const validate = async (text: string): Promise<{ status: number; body: ErrorBody }> => {
  const res = await s.api("/api/config/validate", { method: "POST", headers: { "content-type": "application/yaml" }, body: text });
  return { status: res.status, body: (await res.json()) as ErrorBody };
};

const put = async (content: string, validateFirst = true): Promise<{ status: number; body: ErrorBody }> => {
  const res = await s.api("/api/config", { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ content, validate: validateFirst }) });
  return { status: res.status, body: (await res.json()) as ErrorBody };
};

test("in-process (TypeScript sources) the compiled worker in dist/ does the validation", async () => {
  expect(WORKER_FILE).toMatch(/\/dist\/src\/app\/validate-worker\.js$/);
  const res = await s.api("/api/config/validate", { method: "POST", body: "plugins: []\n" });
  expect(await res.json()).toMatchObject({ ok: true, plugin_count: 0 });
});

describe("YAML alias bomb", () => {
  test("validate: 400 yaml_alias_limit at the alias where expansion stops", async () => {
    const r = await validate(BOMB);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("yaml_alias_limit");
    expect(r.body.diagnostic_details?.[0]).toMatchObject(BOMB_AT);
    expect(r.body.diagnostics?.[0]).toMatch(/^<config>:4:8: error: YAML alias '\*c' expands the document beyond the alias limit/);
  });

  test("save: 400 yaml_alias_limit with validate true and false; the file is unchanged", async () => {
    const file = join(s.dir, "sluice.yaml");
    const before = readFileSync(file, "utf8");
    for (const v of [true, false]) {
      const r = await put(BOMB, v);
      expect(r.status, `validate: ${String(v)}`).toBe(400);
      expect(r.body.code).toBe("yaml_alias_limit");
      expect(r.body.diagnostic_details?.[0]).toMatchObject(BOMB_AT);
    }
    expect(readFileSync(file, "utf8")).toBe(before);
  });

  test("sluice check: exit 1 with file:line:col", async () => {
    const file = join(dir, "bomb.yaml");
    writeFileSync(file, BOMB);
    const r = await runCli(["check", "-c", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}:4:8: error: YAML alias '\\*c'`));
  });
});

describe("call depth", () => {
  test("validate a 7 000-deep jump chain: 400 config_validate_failed at the rule past the limit, naming the depth", async () => {
    const r = await validate(chain(7000));
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("config_validate_failed");
    expect(r.body.diagnostic_details).toHaveLength(1);
    expect(r.body.diagnostic_details?.[0]).toMatchObject(CHAIN_AT);
    expect(r.body.message).toContain(`<config>:${CHAIN_AT.line}:${CHAIN_AT.column}: error: plugin 's63': args[0].exec: calling 's64' here nests 65 calls deep, past the maximum call depth of 64`);
    expect(r.body.message).toContain("the chain starting at 's0' is 7000 deep");
  });

  test("sluice check on a 7 000-deep chain: exit 1 with a location, no stack overflow", async () => {
    const file = join(dir, "chain.yaml");
    writeFileSync(file, chain(7000));
    const r = await runCli(["check", "-c", file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${file}:${CHAIN_AT.line}:${CHAIN_AT.column}: error: plugin 's63'`);
    expect(r.stderr).not.toMatch(/call stack/i);
  });

  test(`a chain of exactly MAX_CALL_DEPTH (${MAX_CALL_DEPTH}) passes validation, starts and answers`, async () => {
    const yaml = chain(MAX_CALL_DEPTH);
    const r = await validate(yaml);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const running = await startSluice(yaml);
    try {
      expect(rcodeOf(await query(running.udpPort, "deep.test", "A"))).toBe(RCODE.NXDOMAIN);
    } finally {
      await running.stop();
    }
  });
});
