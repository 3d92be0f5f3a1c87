// The worked examples of `http_request` and `script` in docs/plugins.md, run as printed with the real
// program: the webhook goes to a sink this test runs (in place of the document's 127.0.0.1:8000), which
// must also have received what the text says; the allow list runs the real grep.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { requireTool } from "../helpers/tools.js";
import { startDocExample, type RunningExample } from "../helpers/doc-example.js";
import { startWebhookSink, type WebhookSink } from "../helpers/webhook-sink.js";

beforeAll(() => {
  requireTool("dig");
  requireTool("curl");
});

describe("Example: webhook for blocked names", () => {
  let sink: WebhookSink;
  let ex: RunningExample;
  beforeAll(async () => {
    sink = await startWebhookSink();
    ex = await startDocExample("webhook for blocked names", { replace: [["http://127.0.0.1:8000", sink.url]] });
  });
  afterAll(async () => {
    await ex.stop();
    await sink.close();
  });

  test("the commands print what the document shows, and the receiver gets the documented request", async () => {
    for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
    const [got] = await sink.waitFor(1);
    expect(got.method).toBe("POST");
    expect(got.url).toBe("/dns-events?source=sluice");
    expect(got.headers["x-client"]).toBe("127.0.0.1");
    expect(got.headers["content-type"]).toBe("application/json");
    expect(got.body).toBe('{"name":"tracker.ads.example.com","type":"A","rcode":"NXDOMAIN","client":"127.0.0.1"}');
  });
});

describe("Example: an allow list kept by a program", () => {
  let ex: RunningExample;
  beforeAll(async () => {
    ex = await startDocExample("an allow list kept by a program", { files: { "allowed.txt": "printer.lan\n" } });
  });
  afterAll(() => ex.stop());

  test("the commands print what the document shows", async () => {
    for (const r of await ex.runAll()) expect(r.output, r.command).toBe(r.printed);
  });
});
