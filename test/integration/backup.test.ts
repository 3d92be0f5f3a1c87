// sluice backup / sluice restore / GET /api/backup over the real program: a server with a dynamic set,
// rule and hosts files, API tokens, the audit trail and a query recorder is backed up (by the CLI once
// it has stopped, and by the API while it runs); restored into a fresh directory, it answers the same
// names the same way and lists the same dynamic rules and tokens (issue 28's acceptance item). Archives
// that were changed (a sha256 that no longer matches, a `../` path, a symbolic link) are refused and
// write nothing; existing files are replaced only with --force.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, expect, test } from "vitest";
import { basic, usersYaml, userOf } from "../helpers/auth.js";
import { runCli } from "../helpers/cli.js";
import { answerIps, query, rcodeOf } from "../helpers/dns.js";
import { tarGz, type TarEntry } from "../helpers/fake-release.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { writeTree } from "../helpers/workdir.js";

const admin = userOf("admin");
const viewer = userOf("viewer");
const ADMIN = { authorization: basic(admin.name, admin.password) };

async function configYaml(): Promise<string> {
  return `api:
  http:
    listen: 127.0.0.1:0
    auth:
${await usersYaml([admin, viewer])}
plugins:
  - tag: blocked
    type: dynamic_domain_set
    args: { path: lists/blocked.txt, flush_interval_ms: 20 }
  - tag: ads
    type: domain_set
    args: { files: [rules/ads.txt] }
  - tag: local
    type: hosts
    args: { files: [rules/hosts.txt], short_circuit: true }
  - { tag: recorder, type: query_recorder, args: { path: data/queries.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $recorder
      - { matches: "qname $blocked", exec: reject NXDOMAIN }
      - { matches: "qname $ads", exec: reject REFUSED }
      - exec: $local
      - exec: black_hole 192.0.2.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

const FILES = { "rules/ads.txt": "domain:ads.test\n", "rules/hosts.txt": "nas.home.test 10.0.0.5\n" };

interface Seen {
  answers: string[];
  rules: { rule: string; expires_at_ms: number | null; source: string }[];
  tokens: { id: string; name: string; role: string; created_by: string }[];
}

async function observe(s: RunningSluice, headers: Record<string, string> = ADMIN): Promise<Seen> {
  const answers: string[] = [];
  for (const name of ["popup.test", "www.popup.test", "x.ads.test", "nas.home.test", "other.test"]) {
    const m = await query(s.udpPort, name);
    answers.push(`${name} ${rcodeOf(m)} ${answerIps(m).join(",")}`);
  }
  const rules = ((await (await s.api("/api/plugins/blocked/rules", { headers })).json()) as Seen).rules.map((r) => ({ rule: r.rule, expires_at_ms: r.expires_at_ms, source: r.source }));
  const tokens = ((await (await s.api("/api/tokens", { headers })).json()) as Seen).tokens.map((t) => ({ id: t.id, name: t.name, role: t.role, created_by: t.created_by }));
  return { answers, rules, tokens };
}

const work = tempDir("sluice-backup-test-");
const dirA = join(work, "a");
let before: Seen;
let secret: string;
let apiArchive: Buffer;
let cliArchive: string;
let viewerStatus: number;
let viewerBody: Record<string, unknown>;
let badQueryStatus: number;
let backupRun: Awaited<ReturnType<typeof runCli>>;

beforeAll(async () => {
  mkdirSync(dirA);
  writeTree(dirA, FILES);
  const a = await startSluice(await configYaml(), {}, { dir: dirA });
  try {
    const add = await a.api("/api/plugins/blocked/rules", { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ rules: ["popup.test", { rule: "full:tracker.test", ttl: "7d" }] }) });
    expect(add.status).toBe(200);
    const made = await a.api("/api/tokens", { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ name: "homepage", role: "viewer" }) });
    expect(made.status).toBe(201);
    secret = ((await made.json()) as { secret: string }).secret;
    before = await observe(a);
    const res = await a.api("/api/backup", { headers: ADMIN });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/gzip");
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="sluice-backup-\d{8}-\d{6}Z\.tar\.gz"$/);
    apiArchive = Buffer.from(await res.arrayBuffer());
    const asViewer = await a.api("/api/backup", { headers: { authorization: basic(viewer.name, viewer.password) } });
    viewerStatus = asViewer.status;
    viewerBody = (await asViewer.json()) as Record<string, unknown>;
    badQueryStatus = (await a.api("/api/backup?queries=maybe", { headers: ADMIN })).status;
  } finally {
    // Stopped, not removed: the dynamic set writes its file at stop, and the CLI backs up what is on disk.
    await a.app.stop();
  }
  cliArchive = join(work, "nightly.tar.gz");
  backupRun = await runCli(["backup", "-c", "sluice.yaml", "-d", dirA, "-o", cliArchive, "--with-queries"]);
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Restores `archive` into a fresh directory and starts Sluice there, as `sluice restore` tells. */
async function restoreAndStart(archive: string, name: string): Promise<{ s: RunningSluice; stdout: string; stderr: string }> {
  const dir = join(work, name);
  const r = await runCli(["restore", archive, "-d", dir]);
  expect(r.code, r.stderr).toBe(0);
  const s = await startSluice(readFileSync(join(dir, "sluice.yaml"), "utf8"), {}, { dir });
  return { s, stdout: r.stdout, stderr: r.stderr };
}

test("sluice backup names each file it put in, in one 0600 archive whose manifest has every sha256", () => {
  expect(backupRun.code, backupRun.stderr).toBe(0);
  expect(backupRun.stdout).toMatch(new RegExp(`^backup written: ${cliArchive} \\(7 files, \\d+ bytes\\)\\n`));
  for (const line of ["config/sluice.yaml  (configuration)", "data/data/auth.json  (api.http.auth.state_file)", "data/data/audit.db  (api.http.audit)", "data/lists/blocked.txt  (plugin 'blocked' (dynamic_domain_set))", "data/rules/ads.txt  (plugin 'ads' (domain_set))", "data/rules/hosts.txt  (plugin 'local' (hosts))", "data/data/queries.db  (plugin 'recorder' (query_recorder))"]) {
    expect(backupRun.stdout).toContain(`  ${line}\n`);
  }
  const listing = execFileSync("tar", ["-tzvf", cliArchive], { encoding: "utf8" });
  expect(listing.split("\n")[0]).toMatch(/^-rw------- .* sluice-backup\/manifest\.json$/);
  expect(listing).toMatch(/-rw------- .* sluice-backup\/data\/data\/auth\.json/);
  const manifest = JSON.parse(execFileSync("tar", ["-xzOf", cliArchive, "sluice-backup/manifest.json"], { encoding: "utf8" })) as { format: string; with_queries: boolean; files: { name: string; sha256: string }[] };
  expect(manifest).toMatchObject({ format: "sluice-backup", format_version: 1, config: "sluice.yaml", with_queries: true });
  expect(manifest.files.every((f) => /^[0-9a-f]{64}$/.test(f.sha256))).toBe(true);
});

test("restored into a fresh directory, it answers the same, lists the same dynamic rules and tokens, and the token still works (acceptance)", async () => {
  const { s, stdout } = await restoreAndStart(cliArchive, "b");
  try {
    expect(stdout).toContain(`  data/lists/blocked.txt -> ${join(work, "b", "lists", "blocked.txt")}\n`);
    expect(stdout).toContain(`start it with: sluice start -c ${join(work, "b", "sluice.yaml")} -d ${join(work, "b")}\n`);
    expect(before.answers).toEqual(["popup.test 3 ", "www.popup.test 3 ", "x.ads.test 5 ", "nas.home.test 0 10.0.0.5", "other.test 0 192.0.2.1"]);
    expect(before.rules.map((r) => r.rule)).toEqual(["domain:popup.test", "full:tracker.test"]);
    expect(before.tokens.map((t) => t.name)).toEqual(["homepage"]);
    expect(await observe(s)).toEqual(before);
    expect((await s.api("/api/control", { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
    // The SQLite files came through SQLite's backup: whole databases with what was written before.
    const audit = new Database(join(s.dir, "data", "audit.db"), { readonly: true });
    try {
      expect((audit.prepare("SELECT count(*) AS n FROM audit_v1 WHERE summary LIKE 'download a backup%'").get() as { n: number }).n).toBeGreaterThanOrEqual(1);
    } finally {
      audit.close();
    }
    const queries = new Database(join(s.dir, "data", "queries.db"), { readonly: true });
    try {
      expect(queries.pragma("integrity_check", { simple: true })).toBe("ok");
    } finally {
      queries.close();
    }
  } finally {
    await s.stop();
  }
});

test("GET /api/backup: admin only (a viewer gets 403), bad query 400, and `sluice restore` takes its archive", async () => {
  expect(viewerStatus).toBe(403);
  expect(viewerBody).toMatchObject({ ok: false, code: "forbidden_role", role_needed: "admin" });
  expect(badQueryStatus).toBe(400);
  const archive = join(work, "from-api.tar.gz");
  writeFileSync(archive, apiArchive);
  const { s, stdout, stderr } = await restoreAndStart(archive, "c");
  try {
    // Without ?queries=true the query database stays out, and the restore says so.
    expect(stderr).toMatch(/note: the backup left out: .*queries\.db \(plugin 'recorder' \(query_recorder\)\): the query database/);
    expect(stdout).toMatch(/^restored 6 files /);
    expect(stdout).not.toContain("queries.db");
    const seen = await observe(s);
    expect(seen.tokens).toEqual(before.tokens);
    expect(seen.answers).toEqual(before.answers);
  } finally {
    await s.stop();
  }
});

/** The good archive's entries, read back with the system's tar, for changing one thing. */
function entriesOf(archive: string): TarEntry[] {
  const dir = tempDir("sluice-backup-entries-");
  try {
    execFileSync("tar", ["-xzf", archive, "-C", dir]);
    const out: TarEntry[] = [];
    const walk = (rel: string): void => {
      for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
        const path = `${rel}/${e.name}`;
        if (e.isDirectory()) walk(path);
        else out.push({ path, content: readFileSync(join(dir, path)), mode: 0o600 });
      }
    };
    walk("sluice-backup");
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a changed archive is refused and writes nothing: a sha256 mismatch, a ../ path, a symbolic link", async () => {
  const good = entriesOf(cliArchive);
  const changed = good.map((e) => (e.path === "sluice-backup/data/rules/hosts.txt" ? { ...e, content: "nas.home.test 203.0.113.66\n" } : e));
  const cases: [string, TarEntry[], RegExp][] = [
    ["sha", changed, /error: data\/rules\/hosts\.txt: its sha256 is not the manifest's/],
    ["dotdot", [...good, { path: "sluice-backup/data/../../../escaped.txt", content: "x" }], /error: the archive was refused: .*escaped\.txt: the path leaves/],
    ["symlink", [...good, { path: "sluice-backup/data/rules/link.txt", type: "2", link: "/etc/passwd" }], /error: the archive was refused: .*link\.txt: SymbolicLink entries are not allowed/],
  ];
  const results = await Promise.all(
    cases.map(async ([name, entries]) => {
      const archive = join(work, `${name}.tar.gz`);
      writeFileSync(archive, tarGz(entries));
      return runCli(["restore", archive, "-d", join(work, `bad-${name}`)]);
    }),
  );
  results.forEach((r, i) => {
    const [name, , message] = cases[i];
    expect(r.code, name).toBe(1);
    expect(r.stderr, name).toMatch(message);
    expect(existsSync(join(work, `bad-${name}`)), name).toBe(false);
  });
  expect(existsSync(join(work, "escaped.txt"))).toBe(false);
});

test("an existing file is replaced only with --force; without it nothing at all is written", async () => {
  const dir = join(work, "d");
  mkdirSync(dir);
  writeFileSync(join(dir, "sluice.yaml"), "# mine\n");
  const refused = await runCli(["restore", cliArchive, "-d", dir]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`error: ${join(dir, "sluice.yaml")} exists: restore into an empty directory, or add --force to replace it`);
  expect(readdirSync(dir)).toEqual(["sluice.yaml"]);
  expect(readFileSync(join(dir, "sluice.yaml"), "utf8")).toBe("# mine\n");
  const forced = await runCli(["restore", cliArchive, "-d", dir, "--force"]);
  expect(forced.code, forced.stderr).toBe(0);
  expect(forced.stdout).toMatch(/^restored 7 files from a backup of /);
  expect(readFileSync(join(dir, "sluice.yaml"), "utf8")).toBe(readFileSync(join(dirA, "sluice.yaml"), "utf8"));
  expect(readFileSync(join(dir, "lists", "blocked.txt"), "utf8")).toBe(readFileSync(join(dirA, "lists", "blocked.txt"), "utf8"));
});

test("usage: the help names both commands; restore needs -d; backup of an invalid configuration exits 1 with its diagnostics", async () => {
  const dir = join(work, "invalid");
  mkdirSync(dir);
  writeFileSync(join(dir, "sluice.yaml"), "plugins:\n  - { tag: x, type: no_such_type }\n");
  const [noDir, bad, help] = await Promise.all([runCli(["restore", cliArchive]), runCli(["backup", "-d", dir, "-o", join(dir, "out.tar.gz")]), runCli(["--help"])]);
  expect(help.stdout).toContain("sluice backup [-c FILE] [-d DIR] [-o ARCHIVE] [--with-queries]");
  expect(help.stdout).toContain("sluice restore ARCHIVE -d DIR [--force]");
  expect(noDir.code).toBe(2);
  expect(noDir.stderr).toContain("error: restore needs -d DIR");
  expect(bad.code).toBe(1);
  expect(bad.stderr).toMatch(/sluice\.yaml:2:\d+: error: .*no_such_type/);
  expect(existsSync(join(dir, "out.tar.gz"))).toBe(false);
});
