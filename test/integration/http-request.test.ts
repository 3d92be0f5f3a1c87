// `http_request` over real sockets: a DNS query through Sluice makes a real HTTP request to a sink the
// test runs on 127.0.0.1 (method, URL, query parameters, headers and bodies rendered from templates,
// before and after the rest of the sequence); the asynchronous queue drops and counts when the sink
// holds its requests, while DNS answers at once; synchronous calls time out and fail per error_mode;
// redirects; keep-alive; and `sluice check` locating template and URL errors.
import { writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { checkErrors } from "../helpers/check.js";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, tempDir, type RunningSluice } from "../helpers/sluice.js";
import { startWebhookSink, type WebhookSink } from "../helpers/webhook-sink.js";
import { VERSION } from "../../src/version.js";

let sink: WebhookSink;
beforeAll(async () => {
  sink = await startWebhookSink();
});
afterAll(() => sink.close());

/** A configuration: `hook` (http_request with these args, YAML flow or block under `args:`), then `rest` rules. */
function config(args: string, rules = ["exec: $hook", "exec: reject 3"]): string {
  return `api:
  http: 127.0.0.1:0
plugins:
  - tag: hook
    type: http_request
    args:
${args
  .trim()
  .split("\n")
  .map((l) => `      ${l}`)
  .join("\n")}
  - tag: main
    type: sequence
    args:
${rules.map((r) => `      - ${r}`).join("\n")}
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
}

/** Waits until an asynchronous check holds (polled every 10 ms). */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const metric = async (s: RunningSluice, name: string, labels = 'plugin_tag="hook"'): Promise<number> => {
  const text = await (await s.api("/api/metrics")).text();
  const m = new RegExp(`^${name}\\{${labels}\\} (\\d+)`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};

let running: RunningSluice | null = null;
async function start(yaml: string): Promise<RunningSluice> {
  running = await startSluice(yaml);
  return running;
}
afterEach(async () => {
  sink.hold(false);
  sink.release();
  await running?.stop();
  running = null;
  sink.requests.length = 0;
});

describe("what is sent", () => {
  test("method, URL with rendered path and query_params, headers and a JSON body, after the rest (rcode known)", async () => {
    const s = await start(
      config(`
method: post
url: "${sink.url}/hook/\${qname}?from=sluice"
query_params: { type: "\${qtype_name}", client: "{client_ip}" }
headers: { X-Qname: "\${qname}", X-Rcode: "{rcode_name}", X-Literal: "{{qname}} costs $$5" }
json: { qname: "\${qname}", qtype: "\${qtype}", n: 1, ok: true, list: ["\${has_resp}", null], quote: 'say "\${qname}"', nested: { r: "\${rcode}" } }
`),
    );
    const answer = await query(s.udpPort, "Hook.Example", "AAAA");
    expect(rcodeOf(answer)).toBe(3);
    const [r] = await sink.waitFor(1);
    expect(r.method).toBe("POST");
    expect(r.url).toBe("/hook/hook.example?from=sluice&type=AAAA&client=127.0.0.1");
    expect(r.headers["x-qname"]).toBe("hook.example");
    expect(r.headers["x-rcode"]).toBe("NXDOMAIN");
    expect(r.headers["x-literal"]).toBe("{qname} costs $5");
    expect(r.headers["content-type"]).toBe("application/json");
    expect(r.headers["user-agent"]).toBe(`sluice/${VERSION}`);
    expect(JSON.parse(r.body)).toEqual({ qname: "hook.example", qtype: "28", n: 1, ok: true, list: ["true", null], quote: 'say "hook.example"', nested: { r: "3" } });
    await eventually("the dispatch to be counted", async () => (await metric(s, "http_request_dispatch_total")) === 1);
  });

  test("phase before sees the query before any response; a form body; an explicit Content-Type wins", async () => {
    const s = await start(
      config(`
method: PUT
url: ${sink.url}/before
phase: before
headers: { Content-Type: "application/x-www-form-urlencoded; charset=utf-8" }
form: { has: "\${has_resp}", rcode: "\${rcode}", marks: "\${marks}", name: "a b&c=\${qname}" }
`, ["exec: mark 7,3", "exec: $hook", "exec: reject 3"]),
    );
    expect(rcodeOf(await query(s.udpPort, "form.example", "A"))).toBe(3);
    const [r] = await sink.waitFor(1);
    expect(r.method).toBe("PUT");
    expect(r.headers["content-type"]).toBe("application/x-www-form-urlencoded; charset=utf-8");
    expect(Object.fromEntries(new URLSearchParams(r.body))).toEqual({ has: "false", rcode: "", marks: "3,7", name: "a b&c=form.example" });
  });

  test("a raw body with content_type; template values in the URL path are percent-encoded", async () => {
    const s = await start(
      config(`
method: PATCH
url: ${sink.url}/raw/\${marks}/\${client_ip}
body: "\${qname} \${qtype_name} \${qclass_name} port=\${client_port}"
content_type: text/plain
`, ["exec: mark 1,2", "exec: $hook", "exec: reject 3"]),
    );
    await query(s.udpPort, "raw.example", "TXT");
    const [r] = await sink.waitFor(1);
    expect(r.url).toBe("/raw/1,2/127.0.0.1");
    expect(r.headers["content-type"]).toBe("text/plain");
    expect(r.body).toMatch(/^raw\.example TXT IN port=\d+$/);
  });

  test("redirects: 302 turns a POST into a GET without body, 307 repeats it; connections are kept alive", async () => {
    sink.status("/r302", 302, "/final302");
    sink.status("/r307", 307, "/final307");
    const s = await start(
      `api:
  http: 127.0.0.1:0
plugins:
  - { tag: a, type: http_request, args: { method: POST, url: "${sink.url}/r302", body: "x=\${qname}", async: false, phase: before } }
  - { tag: b, type: http_request, args: { method: POST, url: "${sink.url}/r307", body: "y=\${qname}", async: false, phase: before } }
  - tag: main
    type: sequence
    args:
      - exec: $a
      - exec: $b
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    );
    expect(rcodeOf(await query(s.udpPort, "redir.example", "A"))).toBe(3);
    const got = sink.requests.map((r) => [r.method, r.url, r.body]);
    expect(got).toEqual([
      ["POST", "/r302", "x=redir.example"],
      ["GET", "/final302", ""],
      ["POST", "/r307", "y=redir.example"],
      ["POST", "/final307", "y=redir.example"],
    ]);
    await query(s.udpPort, "again.example", "A");
    expect(sink.requests[4].remotePort).toBe(sink.requests[0].remotePort);
  });
});

describe("asynchronous: a bounded queue that never slows DNS", () => {
  test("with the sink holding every request, queries are answered at once; past queue_size calls are dropped and counted", async () => {
    sink.hold(true);
    const s = await start(config(`{ method: GET, url: "${sink.url}/held?q=\${qname}", queue_size: 2, max_concurrent: 1, phase: before }`));
    for (let i = 0; i < 6; i++) expect(rcodeOf(await query(s.udpPort, `q${i}.example`, "A", { timeoutMs: 1000 })), `query ${i}`).toBe(3);
    await sink.waitFor(1);
    expect(sink.held()).toBe(1);
    expect(await metric(s, "http_request_dropped_total")).toBe(3);
    sink.hold(false);
    sink.release();
    const sent = await sink.waitFor(3);
    expect(sent.map((r) => r.url)).toEqual(["/held?q=q0.example", "/held?q=q1.example", "/held?q=q2.example"]);
    expect(await metric(s, "http_request_dispatch_total")).toBe(3);
    // Logged once (at warn) for the period, however many were dropped.
    expect(s.logs.filter((l) => l.msg === "http_request failed" && l.level === 40 && l.reason === "dropped")).toHaveLength(1);
  });

  test("stopping while the receiver holds the calls takes at most about one timeout", async () => {
    sink.hold(true);
    const s = await start(config(`{ method: GET, url: "${sink.url}/held", timeout: 300ms, queue_size: 16, max_concurrent: 1 }`));
    for (let i = 0; i < 10; i++) expect(rcodeOf(await query(s.udpPort, `q${i}.example`, "A"))).toBe(3);
    await sink.waitFor(1);
    // Sent one after another, the ten calls would take 10 × 300 ms; the rest is dropped after one timeout.
    const began = performance.now();
    await s.stop();
    running = null;
    expect(performance.now() - began).toBeLessThan(1500);
    expect(sink.requests.length).toBeLessThan(4);
  });

  test("a full queue with error_mode stop stops the pipeline; with fail the query gets SERVFAIL", async () => {
    sink.hold(true);
    const s = await start(
      `api:
  http: 127.0.0.1:0
plugins:
  - { tag: stop, type: http_request, args: { method: GET, url: "${sink.url}/s", queue_size: 1, max_concurrent: 1, phase: before, error_mode: stop } }
  - { tag: fail, type: http_request, args: { method: GET, url: "${sink.url}/f", queue_size: 1, max_concurrent: 1, phase: before, error_mode: fail } }
  - tag: main
    type: sequence
    args:
      - { matches: "qname stop.example", exec: $stop }
      - { matches: "qname fail.example", exec: $fail }
      - exec: reject 3
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`,
    );
    const rcodes = async (name: string): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < 3; i++) out.push(rcodeOf(await query(s.udpPort, name, "A")));
      return out;
    };
    // One in flight, one queued, the third dropped: NXDOMAIN from the rule after, then the error mode.
    expect(await rcodes("stop.example")).toEqual([3, 3, 0]);
    expect(await rcodes("fail.example")).toEqual([3, 3, 2]);
    expect(await metric(s, "http_request_dropped_total", 'plugin_tag="stop"')).toBe(1);
    expect(await metric(s, "http_request_dropped_total", 'plugin_tag="fail"')).toBe(1);
  });
});

describe("synchronous: awaited within timeout, failures per error_mode", () => {
  const yaml = (mode: string, path: string): string =>
    config(`{ method: POST, url: "${sink.url}${path}", body: "\${qname}", async: false, timeout: 300ms, error_mode: ${mode}, phase: before }`);

  test.each([
    ["continue", 3],
    ["stop", 0],
    ["fail", 2],
  ])("timeout with error_mode %s → rcode %i", async (mode, rcode) => {
    sink.hold(true);
    const s = await start(yaml(mode, "/slow"));
    const began = performance.now();
    expect(rcodeOf(await query(s.udpPort, "sync.example", "A", { timeoutMs: 3000 }))).toBe(rcode);
    expect(performance.now() - began).toBeGreaterThanOrEqual(250);
    expect(await metric(s, "http_request_error_total", 'plugin_tag="hook",reason="timeout"')).toBe(1);
    expect(s.logs.find((l) => l.msg === "http_request failed" && l.level === 40)).toMatchObject({ reason: "timeout", method: "POST" });
  });

  test("a non-2xx answer is a failure (reason status); a 2xx answer continues", async () => {
    sink.status("/broken", 500);
    const s = await start(yaml("stop", "/broken"));
    expect(rcodeOf(await query(s.udpPort, "err.example", "A"))).toBe(0);
    expect(await metric(s, "http_request_error_total", 'plugin_tag="hook",reason="status"')).toBe(1);
    sink.status("/broken", 204);
    expect(rcodeOf(await query(s.udpPort, "ok.example", "A"))).toBe(3);
    expect(sink.requests.map((r) => r.body)).toEqual(["err.example", "ok.example"]);
  });

  test("an unreachable URL is a network failure", async () => {
    const closed = await startWebhookSink();
    const url = closed.url;
    await closed.close();
    const s = await start(config(`{ method: GET, url: "${url}/x", async: false, error_mode: fail }`));
    expect(rcodeOf(await query(s.udpPort, "down.example", "A"))).toBe(2);
    expect(await metric(s, "http_request_error_total", 'plugin_tag="hook",reason="network"')).toBe(1);
  });

  test("never to this process's own management API", async () => {
    // The API's port must be known to write the hook's URL: one found free by binding port 0.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const p = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(p));
      });
    });
    const s = await start(config(`{ method: POST, url: "http://127.0.0.1:${port}/api/reload", async: false, error_mode: fail }`).replace("http: 127.0.0.1:0", `http: 127.0.0.1:${port}`));
    expect(rcodeOf(await query(s.udpPort, "api.example", "A"))).toBe(2);
    expect(await metric(s, "http_request_error_total", 'plugin_tag="hook",reason="refused"')).toBe(1);
    expect(s.logs.find((l) => l.msg === "http_request failed" && l.level === 40)?.err).toMatch(/own management API/);
  });
});

describe("sluice check", () => {
  const check = (args: string): string => {
    const dir = tempDir();
    writeFileSync(join(dir, "sluice.yaml"), config(args).replace("api:\n  http: 127.0.0.1:0\n", ""));
    return checkErrors(join(dir, "sluice.yaml"));
  };
  test.each([
    // Configuration expansion sees a ${name} first: an unset one that is no template key is its error.
    ["an unknown ${key}", `method: GET\nurl: "http://127.0.0.1:9/x"\nheaders: { X-A: "\${qnmae}" }`, /sluice\.yaml:7:23: error: undefined environment variable 'qnmae' at plugins\[0\]\.args\.headers\.X-A \(nor is it a template key: qname, /],
    ["a ${ without }", `method: GET\nurl: "http://127.0.0.1:9/\${qname"`, /sluice\.yaml:6:\d+: error: unterminated environment placeholder at plugins\[0\]\.args\.url/],
    ["an unknown key written $${...}", `method: GET\nurl: "http://127.0.0.1:9/x"\nbody: "$\${nope}"`, /sluice\.yaml:7:\d+: error: plugin 'hook': args\.body: unknown template key '\$\{nope\}'/],
    ["a key in the host", `method: GET\nurl: "http://\${qname}/x"`, /sluice\.yaml:6:\d+: error: .*scheme and host must be written out/],
    ["not http", `method: GET\nurl: "ftp://127.0.0.1/x"`, /sluice\.yaml:6:\d+: error: .*not an http or https URL/],
    ["body and json", `method: POST\nurl: "http://127.0.0.1:9/"\nbody: x\njson: { a: 1 }`, /sluice\.yaml:8:\d+: error: plugin 'hook': args\.json: body, json and form exclude each other/],
    ["content_type without body", `method: POST\nurl: "http://127.0.0.1:9/"\njson: { a: 1 }\ncontent_type: text/plain`, /sluice\.yaml:8:\d+: error: .*content_type goes with body/],
    ["an unknown key in a JSON leaf", `method: POST\nurl: "http://127.0.0.1:9/"\njson: { a: [1, "$\${nope}"] }`, /sluice\.yaml:7:\d+: error: plugin 'hook': args\.json\.a\[1\]: unknown template key '\$\{nope\}'/],
    ["a bad proxy", `method: GET\nurl: "http://127.0.0.1:9/"\nsocks5: "not a proxy"`, /sluice\.yaml:7:\d+: error: .*is not a SOCKS5 proxy/],
    ["an outbound profile that is not there", `method: GET\nurl: "http://127.0.0.1:9/"\noutbound: nowhere`, /sluice\.yaml:7:\d+: error: plugin 'hook': args\.outbound: no outbound profile 'nowhere' in network\.outbound \(none is configured\)/],
    ["an unknown arg", `method: GET\nurl: "http://127.0.0.1:9/"\nretries: 3`, /sluice\.yaml:7:7: error: plugin 'hook': args: unknown field 'retries'/],
  ])("%s", (_what, args, message) => {
    expect(check(args)).toMatch(message);
  });
});
