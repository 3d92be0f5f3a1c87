// What `sluice backup` puts in its archive (src/backup/plan.ts): the configuration and its includes
// under config/, and under data/ exactly the files the plugins declare (dataFiles) and the API names
// (auth state file, audit database); files outside their directory and the query database without
// --with-queries are listed as skipped, never silently dropped.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { checkConfig } from "../../src/app/app.js";
import { backupPlan } from "../../src/backup/plan.js";
import { safeName } from "../../src/backup/manifest.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { tempDir } from "../helpers/sluice.js";

const root = tempDir("sluice-backup-plan-");
afterAll(() => rmSync(root, { recursive: true, force: true }));

const CONFIG = `api:
  http:
    listen: 127.0.0.1:0
    auth: { username: admin, password: secret, state_file: state/auth.json }
include: [extra.yaml, ../outside.yaml]
plugins:
  - { tag: dyn, type: dynamic_domain_set, args: { path: lists/dyn.txt } }
  - { tag: ads, type: domain_set, args: { files: [rules/ads.txt, /elsewhere/list.txt] } }
  - { tag: ag, type: adguard_rule, args: { files: [rules/ag.txt] } }
  - { tag: ips, type: ip_set, args: { files: [rules/ips.txt] } }
  - { tag: h, type: hosts, args: { files: [rules/hosts.txt] } }
  - { tag: c, type: cache, args: { size: 100, dump_file: cache.dump } }
  - { tag: rec, type: query_recorder, args: { path: data/q.db } }
  - { tag: who, type: clients, args: { clients: [] } }
  - tag: main
    type: sequence
    args:
      - { matches: ["qname $dyn", "qname $ads", "qname $ag", "resp_ip $ips"], exec: $c }
      - exec: $h
      - exec: $rec
`;

function plan(queries: boolean): ReturnType<typeof backupPlan> {
  const dir = join(root, "work");
  mkdirSync(join(dir, "conf"), { recursive: true });
  writeFileSync(join(dir, "conf", "sluice.yaml"), CONFIG);
  writeFileSync(join(dir, "conf", "extra.yaml"), "plugins: [{ tag: r, type: redirect, args: { files: [rules/redirect.txt] } }]\n");
  writeFileSync(join(dir, "outside.yaml"), "plugins: []\n");
  const { config, analysis } = checkConfig(join(dir, "conf", "sluice.yaml"), createCatalog());
  return backupPlan(config, analysis, dir, { queries });
}

test("the configuration, its includes, the API's files and every file a plugin declares; the rest is named as skipped", () => {
  const p = plan(false);
  expect(p.config).toBe("sluice.yaml");
  expect(p.files.map((f) => `${f.name} ${f.from}${f.sqlite ? " sqlite" : ""}`)).toEqual([
    "config/sluice.yaml configuration",
    "config/extra.yaml include",
    "data/state/auth.json api.http.auth.state_file",
    "data/data/audit.db api.http.audit sqlite",
    // An include's plugins come first (the loader puts them there).
    "data/rules/redirect.txt plugin 'r' (redirect)",
    "data/lists/dyn.txt plugin 'dyn' (dynamic_domain_set)",
    "data/rules/ads.txt plugin 'ads' (domain_set)",
    "data/rules/ag.txt plugin 'ag' (adguard_rule)",
    "data/rules/ips.txt plugin 'ips' (ip_set)",
    "data/rules/hosts.txt plugin 'h' (hosts)",
    "data/cache.dump plugin 'c' (cache)",
    "data/clients.state.json plugin 'who' (clients)",
  ]);
  expect(p.skipped.map((s) => `${s.path} ${s.from}: ${s.reason.split(":")[0]}`)).toEqual([
    `${join(root, "work", "outside.yaml")} include: outside the configuration's directory ${join(root, "work", "conf")}`,
    `/elsewhere/list.txt plugin 'ads' (domain_set): outside the working directory ${join(root, "work")}`,
    `${join(root, "work", "data", "q.db")} plugin 'rec' (query_recorder): the query database`,
  ]);
});

test("--with-queries adds the query database, copied as SQLite", () => {
  const p = plan(true);
  expect(p.files.find((f) => f.from === "plugin 'rec' (query_recorder)")).toMatchObject({ name: "data/data/q.db", sqlite: true });
  expect(p.skipped.some((s) => s.from.includes("query_recorder"))).toBe(false);
});

test("a restore writes only names below config/ or data/", () => {
  expect(["config/sluice.yaml", "data/lists/a.txt"].every(safeName)).toBe(true);
  expect(["data/../x", "../x", "/etc/passwd", "data/", "data//x", "other/x", "data/./x", "data\\..\\x", "config"].some(safeName)).toBe(false);
});
