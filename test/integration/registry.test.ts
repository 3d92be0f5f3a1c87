// Runtime building: init order, skipped providers, clean-up after a failed init, execution paths.
import dgram from "node:dgram";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { PassThrough } from "node:stream";
import { App, checkConfig } from "../../src/app/app.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { decodeMessage } from "../../src/dns/message.js";
import { DnsContext } from "../../src/engine/context.js";
import { PluginInitError } from "../../src/registry/runtime.js";
import type { ExecutorPlugin } from "../../src/registry/types.js";
import { buildQuery } from "../helpers/dns.js";
import { deadUdpPort } from "../helpers/responder.js";
import { startSluice, tempDir } from "../helpers/sluice.js";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a provider no live plugin uses is skipped with a warning and never built", async () => {
  const s = await startSluice(`
plugins:
  - { tag: unused, type: domain_set, args: { files: [does-not-exist.txt] } }
  - { tag: used, type: domain_set, args: { exps: [example.org] } }
  - tag: main
    type: sequence
    args: [{ matches: "qname $used", exec: reject 3 }]
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
  try {
    expect(s.app.runtime.live("unused")).toBeUndefined();
    expect(s.app.runtime.live("used")).toBeDefined();
    expect(s.logs).toContainEqual(expect.objectContaining({ level: 40, plugin: "unused", msg: "skipped provider initialization: no live plugin uses it" }));
  } finally {
    await s.stop();
  }
});

test("a failure during init destroys what was already created: its socket is free again", async () => {
  const port = await deadUdpPort();
  const path = join(dir, "fail.yaml");
  writeFileSync(
    path,
    `
plugins:
  - { tag: main, type: sequence, args: [{ exec: reject 3 }] }
  - { tag: a_udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:${port}" } }
  - { tag: mid, type: sequence, args: [{ exec: jump main }] }
  - { tag: z_fail, type: sequence, args: [{ matches: "qname &missing-rules.txt", exec: jump mid }] }
`,
  );
  // The server is created before the plugin that fails (so there is something to clean up).
  const { analysis } = checkConfig(path, createCatalog());
  expect(analysis.initOrder.indexOf("a_udp")).toBeLessThan(analysis.initOrder.indexOf("z_fail"));
  const err = await App.start({ configPath: path, baseDir: dir, stdout: new PassThrough() }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PluginInitError);
  expect((err as PluginInitError).tag).toBe("z_fail");
  expect((err as PluginInitError).message).toMatch(/missing-rules.txt/);
  // The UDP server was created before the failure; it must have been destroyed and its port released.
  const probe = dgram.createSocket("udp4");
  await new Promise<void>((resolve, reject) => {
    probe.once("error", reject);
    probe.bind(port, "127.0.0.1", () => resolve());
  });
  probe.close();
});

test("execution-path events are collected only when a consumer asks", async () => {
  const s = await startSluice(`
plugins:
  - { tag: child, type: sequence, args: [{ exec: mark 2 }, { exec: return }] }
  - { tag: is_a, type: qtype, args: [A] }
  - tag: main
    type: sequence
    args:
      - { matches: ["$is_a", "!qclass CH"], exec: mark 1 }
      - { matches: "qtype MX", exec: reject 3 }
      - { exec: jump child }
      - { exec: black_hole 192.0.2.1 }
      - { exec: accept }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`);
  try {
    const main = s.app.runtime.live("main")?.instance as ExecutorPlugin;
    const query = decodeMessage(buildQuery("x.test", "A"));
    const quiet = new DnsContext(query, null, "127.0.0.1", 1, "internal");
    await main.execute(quiet, null);
    expect(quiet.path).toBeNull();

    const traced = new DnsContext(query, null, "127.0.0.1", 1, "internal");
    traced.path = [];
    await main.execute(traced, null);
    const events = traced.path.map((e) => `${e.sequenceTag}#${e.nodeIndex} ${e.kind} ${e.tag} ${e.outcome}`);
    expect(events).toEqual([
      "main#0 matcher is_a matched",
      "main#0 matcher qs.match.main.0.1.qclass matched",
      "main#0 builtin mark next",
      "main#1 matcher qs.match.main.1.0.qtype not_matched",
      "child#0 builtin mark next",
      "child#1 builtin return return",
      "main#2 builtin jump next",
      "main#3 executor qs.exec.main.3.black_hole entered",
      "main#3 executor qs.exec.main.3.black_hole next",
      "main#4 builtin accept stop",
    ]);
  } finally {
    await s.stop();
  }
});
