// The `download` executor against a real HTTP file server on 127.0.0.1: the routes and every status
// they answer, one batch at a time (manual overlap refused, pipelines wait), atomic replacement (a
// failed, timed-out, truncated or oversized re-download keeps the old file byte for byte and
// leaves no temp file), redirects, metrics, and startup_if_missing before the plugins start.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { startFileServer, type FileServer } from "../helpers/file-server.js";
import { checkErrors } from "../helpers/check.js";
import { runCli } from "../helpers/cli.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";

let files: FileServer;
beforeAll(async () => {
  files = await startFileServer();
  files.set("a.txt", "full:a.example\n");
  files.set("b.txt", "full:b.example\n");
});
afterAll(() => files.close());

const post = (s: RunningSluice, tag: string, body: string): Promise<Response> =>
  s.api(`/api/plugins/${tag}/download`, { method: "POST", headers: { "content-type": "application/json" }, body });
const json = async (res: Response): Promise<Record<string, unknown>> => (await res.json()) as Record<string, unknown>;

function config(downloads: string, extra = ""): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: dl
    type: download
    args:
      startup_if_missing: false
${extra}      downloads:
${downloads}
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:fetch.test", exec: $dl }
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

const metric = async (s: RunningSluice, name: string): Promise<number> => {
  const text = await (await s.api("/api/metrics")).text();
  return Number(new RegExp(`^${name}\\{plugin_tag="dl"\\} (\\d+)`, "m").exec(text)?.[1] ?? "NaN");
};

describe("routes", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(
      config(`        - { url: "${files.url}/files/a.txt", dir: lists }
        - { url: "${files.url}/redirect/b.txt", dir: lists, filename: b-list.txt }`),
    );
  });
  afterAll(() => s.stop());

  test("GET downloads lists the configured items before anything ran", async () => {
    const res = await s.api("/api/plugins/dl/downloads");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({
      ok: true,
      items: [
        { index: 0, url: `${files.url}/files/a.txt`, path: join(s.dir, "lists", "a.txt"), running: false, last_run_ms: null, last_success_ms: null, last_error: null, size_bytes: null },
        { index: 1, url: `${files.url}/redirect/b.txt`, path: join(s.dir, "lists", "b-list.txt"), running: false, last_run_ms: null, last_success_ms: null, last_error: null, size_bytes: null },
      ],
    });
  });

  test("POST download {} fetches every item (following a redirect) and answers 200 once done", async () => {
    const before = Date.now();
    const res = await post(s, "dl", "{}");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ ok: true, total: 2, succeeded: 2, failed: 0 });
    expect(readFileSync(join(s.dir, "lists", "a.txt"), "utf8")).toBe("full:a.example\n");
    expect(readFileSync(join(s.dir, "lists", "b-list.txt"), "utf8")).toBe("full:b.example\n");
    const items = (await json(await s.api("/api/plugins/dl/downloads"))).items as Record<string, unknown>[];
    expect(items[0]).toMatchObject({ running: false, last_error: null, size_bytes: 15 });
    expect(items[0].last_success_ms as number).toBeGreaterThanOrEqual(before);
    expect(await metric(s, "download_success_total")).toBe(2);
  });

  test("POST download {index} fetches only that item", async () => {
    const a = files.hits("/files/a.txt");
    const b = files.hits("/redirect/b.txt");
    const res = await post(s, "dl", '{"index": 1}');
    expect(await json(res)).toEqual({ ok: true, total: 1, succeeded: 1, failed: 0 });
    expect(files.hits("/files/a.txt")).toBe(a);
    expect(files.hits("/redirect/b.txt")).toBe(b + 1);
  });

  test("400 invalid_download_request: bad JSON, a URL or path in the body, extra keys, a non-integer index", async () => {
    for (const body of ["{", '{"url": "http://evil.example/x"}', '{"path": "/etc/passwd"}', '{"index": 0, "dir": "/tmp"}', '{"index": 1.5}', '{"index": "1"}', '{"index": -1}', "[]", "null", '"x"']) {
      const res = await post(s, "dl", body);
      expect(res.status, body).toBe(400);
      expect(await json(res), body).toMatchObject({ ok: false, code: "invalid_download_request" });
    }
    expect(existsSync(join(s.dir, "..", "x"))).toBe(false);
  });

  test("404 download_index_out_of_range", async () => {
    const res = await post(s, "dl", '{"index": 2}');
    expect(res.status).toBe(404);
    expect(await json(res)).toMatchObject({ ok: false, code: "download_index_out_of_range" });
  });

  test("a redirect away from http(s) is not followed", async () => {
    const s2 = await startSluice(config(`        - { url: "${files.url}/to-file/passwd", dir: lists }`));
    try {
      expect(await json(await post(s2, "dl", "{}"))).toEqual({ ok: false, total: 1, succeeded: 0, failed: 1 });
      const items = (await json(await s2.api("/api/plugins/dl/downloads"))).items as Record<string, unknown>[];
      expect(items[0]).toMatchObject({ last_error: "redirected to an unsupported URL scheme 'file:'", size_bytes: null });
      expect(existsSync(join(s2.dir, "lists", "passwd"))).toBe(false);
    } finally {
      await s2.stop();
    }
  });

  test("404 for a tag that is not a download plugin", async () => {
    expect((await post(s, "main", "{}")).status).toBe(404);
    expect((await s.api("/api/plugins/nope/downloads")).status).toBe(404);
  });
});

describe("one batch at a time", () => {
  let s: RunningSluice;
  beforeAll(async () => {
    s = await startSluice(config(`        - { url: "${files.url}/gate/g.txt", dir: lists }`));
    files.set("g.txt", "full:g.example\n");
  });
  afterAll(() => s.stop());

  test("409 download_busy for a manual request while a batch runs; the item shows running", async () => {
    const first = post(s, "dl", "{}");
    await files.waitHeld("g.txt");
    const items = (await json(await s.api("/api/plugins/dl/downloads"))).items as Record<string, unknown>[];
    expect(items[0]).toMatchObject({ running: true });
    const second = await post(s, "dl", "{}");
    expect(second.status).toBe(409);
    expect(await json(second)).toMatchObject({ ok: false, code: "download_busy" });
    expect(files.held("g.txt")).toBe(1);
    files.release("g.txt");
    expect(await json(await first)).toEqual({ ok: true, total: 1, succeeded: 1, failed: 0 });
  });

  test("concurrent manual requests: exactly one runs, the others are refused", async () => {
    const all = Array.from({ length: 8 }, () => post(s, "dl", "{}"));
    await files.waitHeld("g.txt");
    await new Promise((r) => setTimeout(r, 100));
    expect(files.held("g.txt")).toBe(1);
    files.release("g.txt");
    const statuses = (await Promise.all(all)).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409, 409, 409, 409]);
  });

  test("a pipeline execution during a batch waits for it, then fetches again, and the query is answered", async () => {
    const manual = post(s, "dl", "{}");
    await files.waitHeld("g.txt");
    const answer = query(s.udpPort, "fetch.test", "A", { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    // Still one request: the pipeline did not start a second batch beside the first.
    expect(files.held("g.txt")).toBe(1);
    files.release("g.txt");
    expect((await manual).status).toBe(200);
    // The pipeline's own batch follows.
    await files.waitHeld("g.txt");
    files.release("g.txt");
    expect(rcodeOf(await answer)).toBe(3);
  });

  test("a pipeline whose download fails answers SERVFAIL", async () => {
    const answer = query(s.udpPort, "fetch.test", "A", { timeoutMs: 10_000 });
    await files.waitHeld("g.txt");
    files.release("g.txt", 503);
    expect(rcodeOf(await answer)).toBe(2);
  });
});

describe("a failed re-download keeps the old file byte for byte", () => {
  let s: RunningSluice;
  const original = Buffer.from("full:keep.example\n# \u00e9\u00e8 bytes\n");
  const target = (): string => join(s.dir, "lists", "keep.txt");
  const temps = (): string[] => readdirSync(join(s.dir, "lists")).filter((n) => n !== "keep.txt");
  beforeAll(async () => {
    files.set("keep.txt", original);
    files.mode("keep.txt", "ok");
    s = await startSluice(config(`        - { url: "${files.url}/dyn/keep.txt", dir: lists }`, "      timeout: 300ms\n      max_bytes: 1024\n"));
    expect(await json(await post(s, "dl", "{}"))).toEqual({ ok: true, total: 1, succeeded: 1, failed: 0 });
    expect(readFileSync(target())).toEqual(original);
  });
  afterAll(() => s.stop());

  test.each([
    ["an HTTP error", "fail", /HTTP 500/],
    ["a timeout", "slow", /timed out after 300 ms/],
    ["a connection closed mid-body", "short", /aborted|ended after|socket hang up|ECONNRESET/],
  ] as const)("%s", async (_name, mode, error) => {
    files.mode("keep.txt", mode);
    const res = await post(s, "dl", "{}");
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ ok: false, total: 1, succeeded: 0, failed: 1 });
    expect(readFileSync(target())).toEqual(original);
    expect(temps()).toEqual([]);
    const items = (await json(await s.api("/api/plugins/dl/downloads"))).items as Record<string, unknown>[];
    expect(items[0].last_error).toMatch(error);
    expect(items[0].size_bytes).toBe(original.length);
  });

  test("a body larger than max_bytes", async () => {
    files.mode("keep.txt", "ok");
    files.set("keep.txt", "x".repeat(2000));
    try {
      expect(await json(await post(s, "dl", "{}"))).toMatchObject({ ok: false, failed: 1 });
      expect(readFileSync(target())).toEqual(original);
      expect(temps()).toEqual([]);
      const items = (await json(await s.api("/api/plugins/dl/downloads"))).items as Record<string, unknown>[];
      expect(items[0].last_error).toMatch(/max_bytes \(1024\)/);
    } finally {
      files.set("keep.txt", original);
    }
  });

  test("failures and timeouts are counted; the failure details are in the log", async () => {
    expect(await metric(s, "download_failure_total")).toBe(4);
    expect(await metric(s, "download_timeout_total")).toBe(1);
    expect(await metric(s, "download_success_total")).toBe(1);
    const warnings = s.logs.filter((l) => l.msg === "download failed; the previous file is unchanged");
    expect(warnings).toHaveLength(4);
    expect(warnings[0]).toMatchObject({ url: `${files.url}/dyn/keep.txt`, err: "HTTP 500 Internal Server Error" });
  });

  test("the next good download replaces it, and removes temp files a killed process left", async () => {
    // pid 99999999 is above any pid_max: no such process owns this temp file.
    const stale = join(s.dir, "lists", ".keep.txt.download-99999999-0123456789ab.tmp");
    writeFileSync(stale, "half a file");
    files.set("keep.txt", "full:new.example\n");
    expect(await json(await post(s, "dl", "{}"))).toMatchObject({ ok: true });
    expect(readFileSync(target(), "utf8")).toBe("full:new.example\n");
    expect(existsSync(stale)).toBe(false);
    expect(temps()).toEqual([]);
    files.set("keep.txt", original);
  });
});

describe("startup_if_missing", () => {
  const yaml = (url: string, dir: string): string => `plugins:
  - tag: dl
    type: download
    args:
      downloads:
        - { url: "${url}", dir: ${dir} }
  - { tag: blocked, type: domain_set, args: { files: [${dir}/list.txt] } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname $blocked", exec: reject 3 }
      - exec: reject 5
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

  test("a missing file is fetched before the plugins are created (the provider that reads it starts with it)", async () => {
    files.set("list.txt", "full:boot.example\n");
    const s = await startSluice(yaml(`${files.url}/files/list.txt`, "lists"));
    try {
      expect(rcodeOf(await query(s.udpPort, "boot.example", "A"))).toBe(3);
      expect(rcodeOf(await query(s.udpPort, "other.example", "A"))).toBe(5);
    } finally {
      await s.stop();
    }
  });

  test("an existing file is not fetched again at startup", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "list.txt"), "full:local.example\n");
    const before = files.hits("/files/list.txt");
    const s = await startSluice(yaml(`${files.url}/files/list.txt`, dir));
    try {
      expect(files.hits("/files/list.txt")).toBe(before);
      expect(rcodeOf(await query(s.udpPort, "local.example", "A"))).toBe(3);
    } finally {
      await s.stop();
    }
  });

  test("a failure aborts startup with a clear, located message", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), yaml(`${files.url}/fail/list.txt`, "lists"));
    const r = await runCli(["start", "-c", "sluice.yaml", "-d", dir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/sluice\.yaml:2:\d+: error: plugin 'dl' \(download\) could not prepare: startup_if_missing: downloading http:\/\/127\.0\.0\.1:\d+\/fail\/list\.txt to .*list\.txt failed: HTTP 500/);
  });
});

describe("check-time errors", () => {
  test.each([
    ["ftp URL", `- { url: "ftp://127.0.0.1/x.txt", dir: lists }`, /only http and https URLs can be downloaded \(got 'ftp'\)/],
    ["no file name", `- { url: "http://127.0.0.1/", dir: lists }`, /the URL's path has no file name; set filename/],
    ["bad file name", `- { url: "http://127.0.0.1/a", dir: lists, filename: "../a" }`, /'..\/a' is not a plain file name/],
    ["duplicate target", `- { url: "http://127.0.0.1/a.txt", dir: lists }\n        - { url: "http://127.0.0.2/b", dir: "lists/", filename: a.txt }`, /same target file as downloads\[0\]/],
    ["unknown key", `- { url: "http://127.0.0.1/a.txt", dir: lists, sha256: abc }`, /sha256/],
  ])("%s", async (_name, item, message) => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), `plugins:\n  - tag: dl\n    type: download\n    args:\n      downloads:\n        ${item}\n`);
    const errors = checkErrors(join(dir, "sluice.yaml"));
    expect(errors).toMatch(/sluice\.yaml:\d+:\d+: error: /);
    expect(errors).toMatch(message);
  });
});
