// `reload_provider` seen from a client: a query through it reloads a domain_set from disk.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../../src/config/diagnostics.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { answerWith, startResponder } from "../helpers/responder.js";
import { serversYaml, startSluice, type RunningSluice } from "../helpers/sluice.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function sluice(yaml: string, files: Record<string, string>): Promise<RunningSluice> {
  const s = await startSluice(yaml, files);
  cleanups.push(() => s.stop());
  return s;
}

const rcode = async (s: RunningSluice, name: string): Promise<number> => rcodeOf(await query(s.udpPort, name));
const metric = async (s: RunningSluice, name: string): Promise<number> => {
  const text = await s.app.services.metrics.text();
  return Number(new RegExp(`^${name}\\{plugin_tag="qs\\.exec\\.main\\.0\\.reload_provider"\\} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
};

async function setup(): Promise<RunningSluice> {
  const up = await startResponder((q) => answerWith(q, ["192.0.2.1"]));
  cleanups.push(() => up.close());
  return sluice(
    `plugins:
  - tag: first
    type: domain_set
    args: { files: [first.txt] }
  - tag: second
    type: domain_set
    args: { files: [second.txt] }
  - tag: main
    type: sequence
    args:
      - { matches: "qname full:reload.internal", exec: "reload_provider $first $second" }
      - { matches: "qname full:reload.internal", exec: reject 5 }
      - { matches: "qname $first $second", exec: reject 3 }
      - exec: forward 127.0.0.1:${up.port}
${serversYaml()}`,
    { "first.txt": "full:old.example\n", "second.txt": "full:other.example\n" },
  );
}

test("editing a set's file changes answers only after a query goes through reload_provider", async () => {
  const s = await setup();
  expect(await rcode(s, "old.example")).toBe(3);
  expect(await rcode(s, "new.example")).toBe(0);
  writeFileSync(join(s.dir, "first.txt"), "full:new.example\n");
  expect(await rcode(s, "new.example")).toBe(0);
  expect(await rcode(s, "reload.internal")).toBe(5);
  expect(await rcode(s, "new.example")).toBe(3);
  expect(await rcode(s, "old.example")).toBe(0);
  expect(await metric(s, "reload_provider_reload_total")).toBe(2);
  expect(await metric(s, "reload_provider_reload_error_total")).toBe(0);
});

test("the first failing reload stops the rest and fails the query; the old rules stay in force", async () => {
  const s = await setup();
  writeFileSync(join(s.dir, "first.txt"), "full:\n");
  writeFileSync(join(s.dir, "second.txt"), "full:later.example\n");
  expect(await rcode(s, "reload.internal")).toBe(2);
  expect(await rcode(s, "old.example")).toBe(3);
  // `second` came after the failure and was not reloaded.
  expect(await rcode(s, "later.example")).toBe(0);
  expect(await metric(s, "reload_provider_reload_total")).toBe(1);
  expect(await metric(s, "reload_provider_reload_error_total")).toBe(1);
  const failure = s.logs.find((l) => l.msg === "query failed; answering SERVFAIL");
  expect(String(failure?.err)).toContain("reloading 'first' failed");
  expect(String(failure?.err)).toContain("first.txt:1");
});

test("only $provider references are accepted", async () => {
  const attempt = async (args: string): Promise<string> => {
    const err = await startSluice(`plugins:
  - tag: set
    type: domain_set
    args: { exps: [a.example] }
  - tag: rp
    type: reload_provider
    args: ${args}
  - tag: main
    type: sequence
    args: [{ exec: $rp }]
${serversYaml()}`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  };
  expect(await attempt('"&rules.txt"')).toContain("rule files cannot be reloaded here");
  expect(await attempt("[domain:a.example]")).toContain("only $provider references are accepted");
  expect(await attempt("[]")).toContain("args");
  expect(await attempt('"$nosuch"')).toContain("nosuch");
});
