// The configuration routes over real HTTP: read, save (optimistic concurrency, validation with
// located diagnostics, atomic write, reload on request), check the file, validate request text.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { waitFor } from "xstate";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { apiYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

/** A working configuration whose sequence answers every A query with `answer`. */
const config = (answer: string, extra = ""): string => apiYaml(`black_hole ${answer}`, { tcp: null }) + extra;

let s: RunningSluice;
let file: string;
beforeAll(async () => {
  // The body limit is read at start: raised past the default 8 MiB for the 20 MiB save below.
  s = await startSluice(config("10.0.0.1").replace("http: 127.0.0.1:0", "http: { listen: 127.0.0.1:0, limits: { body_bytes: 67108864 } }"));
  file = join(s.dir, "sluice.yaml");
});
afterAll(() => s.stop());

interface Json {
  [key: string]: unknown;
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; type: string; body: Json }> {
  const init: RequestInit = { method, headers };
  if (body !== undefined) {
    init.body = typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    if (typeof body !== "string" && !Buffer.isBuffer(body)) init.headers = { "content-type": "application/json", ...headers };
  }
  const res = await s.api(path, init);
  return { status: res.status, type: res.headers.get("content-type") ?? "", body: (await res.json()) as Json };
}

const put = (body: unknown): ReturnType<typeof call> => call("PUT", "/api/config", body);
const current = async (): Promise<Json> => (await call("GET", "/api/config")).body;
/** Files in the config directory other than the config itself and the audit trail's data/ (temp files of a save must not linger). */
const strays = (): string[] => readdirSync(s.dir).filter((n) => n !== "sluice.yaml" && n !== "data");

async function reloadDone(version: string): Promise<Json> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const status = (await call("GET", "/api/reload/status")).body;
    if (status.status === "failed") throw new Error(`reload failed: ${String(status.last_error)}`);
    if (status.status === "ok" && status.running_version === version) return status;
    if (Date.now() > deadline) throw new Error(`reload did not finish: ${JSON.stringify(status)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("GET /api/config", () => {
  test("returns the file as written with its sha256 version and mtime", async () => {
    const r = await call("GET", "/api/config");
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    const text = readFileSync(file, "utf8");
    expect(r.body).toEqual({ ok: true, path: file, format: "yaml", content: text, version: sha256(text), updated_at_ms: Math.trunc(statSync(file).mtimeMs) });
  });
});

describe("PUT /api/config", () => {
  test("round trip: GET, edit, PUT with base_version, GET shows the new version; the write leaves no temp file", async () => {
    const before = await current();
    const edited = String(before.content).replace("10.0.0.1", "10.0.0.2");
    const r = await put({ format: "yaml", content: edited, base_version: before.version });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, path: file, format: "yaml", version: sha256(edited), plugin_count: 2, reload: null, message: "configuration saved" });
    expect(r.body.init_order).toEqual(["main", "udp"]);
    expect(r.body.updated_at_ms).toBe(Math.trunc(statSync(file).mtimeMs));
    expect(readFileSync(file, "utf8")).toBe(edited);
    const after = await current();
    expect(after.version).toBe(sha256(edited));
    expect(after.content).toBe(edited);
    expect(strays()).toEqual([]);
  });

  test("a stale base_version is a 409 config_conflict and the file is untouched", async () => {
    const before = await current();
    const stale = sha256("something else");
    const r = await put({ content: config("10.9.9.9"), base_version: stale });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ ok: false, code: "config_conflict", current_version: before.version });
    expect((await current()).version).toBe(before.version);
  });

  test("unparsable YAML is a 400 with line and column, and the file is untouched", async () => {
    const before = await current();
    const broken = "plugins:\n  - tag: main\n    type: sequence\n    args: [ { exec: black_hole 10.0.0.3 }\n";
    for (const validate of [true, false]) {
      const r = await put({ content: broken, validate });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("config_validate_failed");
      const details = r.body.diagnostic_details as Json[];
      expect(details.length).toBeGreaterThan(0);
      expect(details[0]).toMatchObject({ severity: "error", file, line: expect.any(Number) as number, column: expect.any(Number) as number });
      expect(details[0].line).toBeGreaterThanOrEqual(4);
      expect((r.body.diagnostics as string[])[0]).toMatch(/sluice\.yaml:\d+:\d+: error: YAML syntax error/);
    }
    expect((await current()).version).toBe(before.version);
  });

  test("an invalid plugin is a 400 pointing at the plugin's line; a wrong format and wrong field types are 400s", async () => {
    const bad = config("10.0.0.1", "  - tag: odd\n    type: no_such_plugin\n");
    const r = await put({ content: bad });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("config_validate_failed");
    const line = bad.split("\n").findIndex((l) => l.includes("no_such_plugin")) + 1;
    expect(r.body.diagnostic_details).toEqual([expect.objectContaining({ line, column: 11, end_line: line, file, severity: "error" })]);
    expect(r.body.message).toMatch(/no_such_plugin/);

    const fmt = await put({ format: "json", content: config("10.0.0.1") });
    expect(fmt).toMatchObject({ status: 400, body: { code: "unsupported_config_format" } });
    const types: [unknown, RegExp][] = [
      [{ content: 42 }, /body\.content must be string/],
      [{}, /content/],
      [{ content: "plugins: []", validate: "yes" }, /body\.validate must be boolean/],
      [{ content: "plugins: []", reload: 1 }, /body\.reload must be boolean/],
      [{ content: "plugins: []", base_version: "abc" }, /body\.base_version must match/],
    ];
    for (const [body, message] of types) {
      const t = await put(body);
      expect(t.status, JSON.stringify(body)).toBe(400);
      expect(t.body.code).toBe("invalid_request");
      expect(String(t.body.message)).toMatch(message);
    }
    const notJson = await call("PUT", "/api/config", "plugins: []", { "content-type": "text/plain" });
    expect(notJson.status).toBe(400);
  });

  test("validate:false saves a config that fails analysis (and says why) but still refuses unparsable YAML", async () => {
    const before = await current();
    const unknown = config("10.0.0.1", "  - tag: later\n    type: not_yet_installed\n");
    const r = await put({ content: unknown, validate: false, base_version: before.version });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, version: sha256(unknown), plugin_count: 3, init_order: [] });
    expect((r.body.diagnostics as string[]).join("\n")).toMatch(/not_yet_installed/);
    expect(readFileSync(file, "utf8")).toBe(unknown);
    const check = await call("GET", "/api/config/check");
    expect(check.status).toBe(400);
    expect(check.body.code).toBe("config_check_failed");
    const line = unknown.split("\n").findIndex((l) => l.includes("not_yet_installed")) + 1;
    expect(check.body.diagnostic_details).toEqual([expect.objectContaining({ file, line, severity: "error" })]);
    expect((check.body.diagnostics as string[])[0]).toContain(`${file}:${line}:`);
    // put a working file back for the tests that follow
    expect((await put({ content: config("10.0.0.1") })).status).toBe(200);
  });

  test("${VAR} placeholders are validated expanded but written literally", async () => {
    const text = config("${SLUICE_CONFIG_API_TEST_ANSWER:-10.0.0.7}");
    const r = await put({ content: text, reload: true });
    expect(r.status).toBe(200);
    expect(readFileSync(file, "utf8")).toBe(text);
    expect((await current()).content).toBe(text);
    await reloadDone(sha256(text));
    expect(answerIps(await query(s.port("udp"), "any.test", "A"))).toEqual(["10.0.0.7"]);
    const undefinedVar = await put({ content: config("${SLUICE_CONFIG_API_TEST_UNSET}") });
    expect(undefinedVar.status).toBe(400);
    expect(String(undefinedVar.body.message)).toMatch(/SLUICE_CONFIG_API_TEST_UNSET/);
  });

  test("reload:true reloads the saved file: the reload status reaches ok with the saved version and answers change", async () => {
    const before = await current();
    const text = config("10.0.0.4");
    const r = await put({ content: text, base_version: before.version, reload: true });
    expect(r.status).toBe(200);
    expect((r.body.reload as Json).status).toMatch(/^(pending|in_progress)$/);
    const status = await reloadDone(sha256(text));
    expect(status.target_version).toBe(sha256(text));
    expect(answerIps(await query(s.port("udp"), "any.test", "A"))).toEqual(["10.0.0.4"]);
  });

  test("reload:true while a reload is running is a 409 reload_busy, and the file IS saved", async () => {
    // The first reload reads a domain list from a FIFO, so it stays in progress until the test writes to it.
    const fifo = join(s.dir, "slow.list");
    execFileSync("mkfifo", [fifo]);
    const slow = config("10.0.0.5", "  - { tag: slow_set, type: domain_set, args: { files: [slow.list] } }\n  - { tag: slow, type: qname, args: [$slow_set] }\n").replace(
      "      - exec: black_hole 10.0.0.5",
      "      - { matches: $slow, exec: reject 3 }\n      - exec: black_hole 10.0.0.5",
    );
    try {
      const first = await put({ content: slow, reload: true });
      expect(first.status).toBe(200);
      const next = config("10.0.0.6");
      const second = await put({ content: next, reload: true });
      expect(second.status).toBe(409);
      expect(second.body).toMatchObject({ ok: false, code: "reload_busy", version: sha256(next), saved: true });
      expect(String(second.body.message)).toMatch(/configuration was saved/);
      expect(readFileSync(file, "utf8")).toBe(next);
      expect((await call("GET", "/api/reload/status")).body.status).toMatch(/^(pending|in_progress)$/);
    } finally {
      await writeFile(fifo, "blocked.test\n");
    }
    await reloadDone(sha256(slow));
    // The list the reload waited for is in force.
    expect(rcodeOf(await query(s.port("udp"), "blocked.test", "A"))).toBe(3);
    expect(answerIps(await query(s.port("udp"), "other.test", "A"))).toEqual(["10.0.0.5"]);
    // The saved file is what the next reload runs.
    expect((await call("POST", "/api/reload")).status).toBe(202);
    await reloadDone(sha256(config("10.0.0.6")));
    expect(answerIps(await query(s.port("udp"), "any.test", "A"))).toEqual(["10.0.0.6"]);
  });

  test("two concurrent PUTs with the same base_version: exactly one wins, the other is a 409", async () => {
    for (let round = 0; round < 5; round++) {
      const base = (await current()).version;
      const [a, b] = await Promise.all([
        put({ content: config(`10.1.${round}.1`), base_version: base }),
        put({ content: config(`10.1.${round}.2`), base_version: base }),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses).toEqual([200, 409]);
      const loser = a.status === 409 ? a : b;
      const winner = a.status === 200 ? a : b;
      expect(["config_conflict", "config_save_busy"]).toContain(loser.body.code);
      expect((await current()).version).toBe(winner.body.version);
    }
    expect(strays().filter((n) => n !== "slow.list")).toEqual([]);
  });

  test("a PUT while another save is being written is a 409 config_save_busy; the running save completes", async () => {
    const base = (await current()).version;
    // 20 MiB of comment: the first save spends a while writing and fsyncing it.
    const large = `${config("10.3.0.1")}${`# ${"x".repeat(65_533)}\n`.repeat(320)}`;
    const first = put({ content: large, base_version: base });
    await waitFor(s.app.configActor, (snap) => snap.matches("saving"), { timeout: 10_000 });
    const second = await put({ content: config("10.3.0.2"), base_version: base });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ ok: false, code: "config_save_busy" });
    expect((await first).status).toBe(200);
    expect(readFileSync(file, "utf8")).toBe(large);
    expect(s.app.configActor.getSnapshot().value).toBe("idle");
  });

  test("the config actor is listed in /api/actors and the routes in the OpenAPI document", async () => {
    const actors = (await call("GET", "/api/actors")).body.actors as Json[];
    expect(actors).toEqual(expect.arrayContaining([expect.objectContaining({ id: "config", parent: "app", state: "idle" })]));
    const doc = (await call("GET", "/api/openapi.json")).body as { paths: Record<string, Record<string, Json>> };
    expect(Object.keys(doc.paths["/api/config"]).sort()).toEqual(["get", "put"]);
    expect(doc.paths["/api/config"].put.requestBody).toMatchObject({ content: { "application/json": { schema: { required: ["content"] } } } });
    expect(doc.paths["/api/config/check"].get.tags).toEqual(["config"]);
    expect(doc.paths["/api/config/validate"].post.summary).toMatch(/Validate YAML text/);
  });
});

describe("GET /api/config/check", () => {
  test("a valid file: plugin count and dependency graph", async () => {
    expect((await put({ content: config("10.0.0.1") })).status).toBe(200);
    const r = await call("GET", "/api/config/check");
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    expect(r.body).toMatchObject({ ok: true, source: "file", path: file, plugin_count: 2, message: "configuration is valid" });
    const graph = r.body.dependency_graph as Json;
    expect(graph.init_order).toEqual(["main", "udp"]);
    expect(graph.edges).toEqual([expect.objectContaining({ from: "udp", to: "main", kind: "executor" })]);
  });

  test("a broken file (edited behind the API's back) is a 400 with every problem located", async () => {
    const text = "plugins:\n  - tag: main\n    type: sequence\n    args:\n      - exec: $nowhere\n  - tag: odd\n    type: not_a_plugin\n";
    writeFileSync(file, text);
    const r = await call("GET", "/api/config/check");
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("config_check_failed");
    const details = r.body.diagnostic_details as Json[];
    expect(details.map((d) => [d.file, d.line])).toEqual(expect.arrayContaining([[file, 5], [file, 7]]));
    expect(r.body.diagnostics as string[]).toHaveLength(details.length);
    writeFileSync(file, config("10.0.0.1"));
  });
});

describe("POST /api/config/validate", () => {
  const valid = "plugins:\n  - tag: main\n    type: sequence\n    args:\n      - exec: black_hole 10.0.0.1\n";

  test("raw YAML, in any content type", async () => {
    for (const type of ["text/plain", "application/yaml", "application/octet-stream"]) {
      const r = await call("POST", "/api/config/validate", valid, { "content-type": type });
      expect(r.status, type).toBe(200);
      expect(r.body).toMatchObject({ ok: true, source: "body", path: null, plugin_count: 1, message: "configuration is valid" });
      expect((r.body.dependency_graph as Json).init_order).toEqual(["main"]);
    }
  });

  test("the JSON envelope, with or without a JSON content type", async () => {
    const envelope = JSON.stringify({ format: "yaml", content: valid });
    for (const type of ["application/json", "text/plain"]) {
      const r = await call("POST", "/api/config/validate", envelope, { "content-type": type });
      expect(r.status, type).toBe(200);
      expect(r.body.plugin_count).toBe(1);
    }
    const wrong = await call("POST", "/api/config/validate", { format: "toml", content: valid });
    expect(wrong).toMatchObject({ status: 400, body: { code: "unsupported_config_format" } });
  });

  test("invalid text: 400 config_validate_failed with located diagnostics", async () => {
    const r = await call("POST", "/api/config/validate", "plugins:\n  - tag: x\n    type: missing_plugin\n", { "content-type": "text/plain" });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("config_validate_failed");
    expect(r.body.diagnostic_details).toEqual([expect.objectContaining({ file: null, line: 3, column: 11, severity: "error" })]);
    expect((r.body.diagnostics as string[])[0]).toMatch(/^<config>:3:11: error: /);
  });

  test("empty body, whitespace, invalid UTF-8 and include are refused", async () => {
    expect((await call("POST", "/api/config/validate", "", { "content-type": "text/plain" })).body.code).toBe("empty_config_body");
    expect((await call("POST", "/api/config/validate", "  \n ", { "content-type": "text/plain" })).body.code).toBe("empty_config_body");
    expect((await call("POST", "/api/config/validate", { content: "" })).body.code).toBe("empty_config_body");
    const bad = await call("POST", "/api/config/validate", Buffer.from([0x70, 0x6c, 0xff, 0xfe, 0x0a]), { "content-type": "text/plain" });
    expect(bad).toMatchObject({ status: 400, body: { code: "invalid_utf8_body" } });
    const inc = await call("POST", "/api/config/validate", "include: [other.yaml]\nplugins: []\n", { "content-type": "text/plain" });
    expect(inc.status).toBe(400);
    expect(inc.body.code).toBe("config_validate_failed");
    expect(String(inc.body.message)).toMatch(/include is only supported/);
    expect(inc.body.diagnostic_details).toEqual([expect.objectContaining({ line: 1, column: 1 })]);
  });
});
