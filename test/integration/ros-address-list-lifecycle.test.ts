// ros_address_list over its lifetime, against the RouterOS-shaped server (test/helpers/routeros.ts):
// the start-up scan (rows of an earlier run taken over, stale persistent rows removed, others' rows left
// alone), persistent addresses and the periodic reconcile, cleanup at shutdown (or not), a reload that
// hands the rows over, `sluice check` errors located in the file, and the worked example of
// docs/plugins.md run as printed.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { startDocExample } from "../helpers/doc-example.js";
import { answerIps, query } from "../helpers/dns.js";
import { makePki, type Pki } from "../helpers/pki.js";
import { answerWith, startResponder, type Responder } from "../helpers/responder.js";
import { startFakeRouter, type FakeRouter } from "../helpers/routeros.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { requireTool } from "../helpers/tools.js";

let pki: Pki;
let caFile: string;
let upstream: Responder;

beforeAll(async () => {
  const dir = tempDir();
  pki = makePki(dir);
  caFile = join(dir, "ca.pem");
  writeFileSync(caFile, pki.ca);
  upstream = await startResponder((q) => answerWith(q, q.questions[0].type === 28 ? ["2001:db8::5"] : ["192.0.2.5"], 300));
});
afterAll(async () => {
  await upstream.close();
});

async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function yaml(router: FakeRouter, extra: string, api = true): string {
  return `${api ? "api:\n  http: 127.0.0.1:0\n" : ""}plugins:
  - tag: ros
    type: ros_address_list
    args:
      address: "${router.url}"
      username: api-user
      password: secret
      ca: "${caFile}"
      address_list4: policy4
      address_list6: policy6
      batch_interval: 5ms
      retry_interval: 5ms
${extra}
  - tag: main
    type: sequence
    args:
      - exec: $ros
      - exec: forward 127.0.0.1:${upstream.port}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

interface Status {
  state: string;
  recovered: boolean;
  entries: { dynamic: number; persistent: number; foreign: number };
  scans: number;
}
const status = async (s: RunningSluice): Promise<Status> => (await (await s.api("/api/plugins/ros/sync/status")).json()) as Status;
const view = (router: FakeRouter): string[] => router.rows().map((r) => `${r.list} ${r.address} ${r.timeoutSet ?? "-"} ${r.comment}`).sort();

describe("ros_address_list lifecycle", () => {
  test("start-up scan: an earlier run's rows are taken over, stale persistent rows removed, others' rows untouched; persistent rows added", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    router.seed({ list: "policy4", address: "192.0.2.5", comment: "sluice;plugin=ros;kind=D;domain=old.test", timeout: 600 });
    router.seed({ list: "policy4", address: "203.0.113.9", comment: "sluice;plugin=ros;kind=P" }); // no longer configured
    router.seed({ list: "policy4", address: "198.51.100.0/24", comment: "operator" }); // covers a persistent address
    router.seed({ list: "policy4", address: "192.0.2.77", comment: "sluice;plugin=other;kind=D" }); // another plugin's
    router.seed({ list: "elsewhere", address: "203.0.113.9", comment: "sluice;plugin=ros;kind=P" }); // another list
    const dir = tempDir();
    writeFileSync(join(dir, "persist.txt"), "# kept\n2001:db8:100::/48\n203.0.113.50  # a host\n");
    const s = await startSluice(yaml(router, `      persistent:\n        ips: ["198.51.100.0/24", "203.0.113.1/24"]\n        files: ["${join(dir, "persist.txt")}"]`));
    try {
      await until("the scan", async () => (await status(s)).recovered);
      expect(view(router)).toEqual([
        "elsewhere 203.0.113.9 - sluice;plugin=ros;kind=P",
        "policy4 192.0.2.5 600 sluice;plugin=ros;kind=D;domain=old.test",
        "policy4 192.0.2.77 - sluice;plugin=other;kind=D",
        "policy4 198.51.100.0/24 - operator",
        "policy4 203.0.113.0/24 - sluice;plugin=ros;kind=P",
        "policy4 203.0.113.50 - sluice;plugin=ros;kind=P",
        "policy6 2001:db8:100::/48 - sluice;plugin=ros;kind=P",
      ]);
      expect((await status(s)).entries).toEqual({ dynamic: 1, persistent: 3, foreign: 1 });
      // The taken-over row has plenty of time left: the same address answered again costs no call.
      const calls = router.calls.length;
      expect(answerIps(await query(s.udpPort, "again.test"))).toEqual(["192.0.2.5"]);
      await until("the answer handled", async () => (await status(s)).state === "idle");
      expect(router.calls.length).toBe(calls);
    } finally {
      await s.stop();
      await router.close();
    }
    // Cleanup removed this plugin's rows in its lists, and nothing else.
    expect(view(router)).toEqual(["elsewhere 203.0.113.9 - sluice;plugin=ros;kind=P", "policy4 192.0.2.77 - sluice;plugin=other;kind=D", "policy4 198.51.100.0/24 - operator"]);
  });

  test("the periodic reconcile puts back a persistent row an operator removed", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    const s = await startSluice(yaml(router, `      reconcile_interval: 20ms\n      persistent: { ips: ["203.0.113.7"] }`));
    try {
      await until("the persistent row", () => router.rows().length === 1);
      const removed = router.rows()[0][".id"];
      router.remove(removed);
      await until("the row put back", () => router.rows().length === 1);
      expect(view(router)).toEqual(["policy4 203.0.113.7 - sluice;plugin=ros;kind=P"]);
      expect(router.rows()[0][".id"]).not.toBe(removed);
      expect((await status(s)).scans).toBeGreaterThanOrEqual(2);
    } finally {
      await s.stop();
      await router.close();
    }
  });

  test("cleanup_on_shutdown: false leaves the rows for the next start, which takes them over", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    const first = await startSluice(yaml(router, "      cleanup_on_shutdown: false"));
    await query(first.udpPort, "a.test");
    await query(first.udpPort, "a.test", "AAAA");
    await until("two rows", () => router.rows().length === 2);
    await first.stop();
    expect(view(router)).toEqual(["policy4 192.0.2.5 300 sluice;plugin=ros;kind=D;domain=a.test", "policy6 2001:db8::5 300 sluice;plugin=ros;kind=D;domain=a.test"]);
    const second = await startSluice(yaml(router, ""));
    try {
      await until("the scan", async () => (await status(second)).recovered);
      expect((await status(second)).entries).toEqual({ dynamic: 2, persistent: 0, foreign: 0 });
    } finally {
      await second.stop();
    }
    expect(router.rows()).toEqual([]);
    await router.close();
  });

  test("a reload hands the rows over: none removed, none added twice; the last stop removes them", async () => {
    const router = await startFakeRouter({ tls: pki.server });
    const s = await startSluice(yaml(router, ""));
    try {
      await query(s.udpPort, "a.test");
      await until("the row", () => router.rows().length === 1);
      const before = router.rows()[0][".id"];
      expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
      const actorIds = async (): Promise<string[]> => ((await (await s.api("/api/actors")).json()) as { actors: { id: string }[] }).actors.map((a) => a.id);
      // Swapped, and the old instance destroyed (its manager gone).
      await until("the old manager gone", async () => {
        const ids = await actorIds();
        return ids.includes("runtime:2/plugin:ros/ros:ros") && !ids.includes("runtime:1/plugin:ros/ros:ros");
      });
      await until("the new manager's scan", async () => (await status(s)).recovered);
      expect(router.rows().map((r) => r[".id"])).toEqual([before]);
      expect(router.calls.filter((c) => c.method === "DELETE")).toEqual([]);
      await query(s.udpPort, "a.test");
      expect(router.calls.filter((c) => c.method === "PUT")).toHaveLength(1);
    } finally {
      await s.stop();
    }
    expect(router.rows()).toEqual([]);
    await router.close();
  });

  describe("check-time errors, located in the file", () => {
    const check = (args: string): string => {
      const dir = tempDir();
      writeFileSync(join(dir, "sluice.yaml"), `plugins:\n  - tag: ros\n    type: ros_address_list\n    args:\n      username: u\n      password: p\n${args}\n`);
      return checkErrors(join(dir, "sluice.yaml"));
    };
    test.each([
      ["the binary API port", `      address: "10.0.0.1:8728"\n      address_list4: l`, /sluice\.yaml:7:\d+: error: .*port 8728 is RouterOS's binary API/],
      ["no list", `      address: 10.0.0.1`, /sluice\.yaml:5:\d+: error: .*set address_list4, address_list6 or both/],
      ["min above max", `      address: 10.0.0.1\n      address_list4: l\n      min_ttl: 600\n      max_ttl: 60`, /sluice\.yaml:9:\d+: error: .*min_ttl \(600\) is above max_ttl \(60\)/],
      ["a bad persistent address", `      address: 10.0.0.1\n      address_list4: l\n      persistent: { ips: ["10.0.0.300"] }`, /sluice\.yaml:9:\d+: error: .*'10\.0\.0\.300' is not an IP address or CIDR/],
      ["a persistent address without its list", `      address: 10.0.0.1\n      address_list4: l\n      persistent: { ips: ["2001:db8::1"] }`, /'2001:db8::1' is IPv6 but address_list6 is not set/],
      ["a prefix with ';'", `      address: 10.0.0.1\n      address_list4: l\n      comment_prefix: "a;b"`, /sluice\.yaml:9:\d+: error: .*comment_prefix must not contain ';' or '='/],
      ["ca with insecure", `      address: 10.0.0.1\n      address_list4: l\n      ca: ca.pem\n      insecure_skip_verify: true`, /a CA and insecure_skip_verify \(tls\.insecure\) cannot be used together/],
      ["an unknown key", `      address: 10.0.0.1\n      address_list4: l\n      adress_list6: l6`, /sluice\.yaml:9:\d+: error: .*adress_list6/],
      ["credentials in the URL", `      address: "https://admin:pw@10.0.0.1"\n      address_list4: l`, /put the credentials in username and password/],
    ])("%s", (_name, args, message) => {
      expect(check(args)).toMatch(message);
    });
  });

  test("the worked example in docs/plugins.md runs as printed", async () => {
    requireTool("dig");
    requireTool("curl");
    requireTool("jq");
    const router = await startFakeRouter({ tls: pki.server });
    const ex = await startDocExample("policy routing by name on a MikroTik router", {
      replace: [["192.168.88.1", `127.0.0.1:${router.port}`]],
      files: { "routeros-ca.pem": pki.ca.toString() },
      // RouterOS shows the time a row has left: a second may have gone by.
      normalize: (out) => out.replace(/ 5\ds$/gm, " 1m"),
    });
    try {
      for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
    } finally {
      await ex.stop();
    }
    // It stopped cleanly and took its rows with it.
    expect(router.rows()).toEqual([]);
    await router.close();
  });
});
