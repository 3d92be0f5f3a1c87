// `${key}` templates of the hook executors: the syntax (both forms, escapes, literal braces and
// dollars, errors) and what each key reads from a query.
import { describe, expect, test } from "vitest";
import { syntheticContext } from "../../src/engine/context.js";
import type { ArgError } from "../../src/engine/plugin-args.js";
import { render, TEMPLATE_KEYS, TemplateSet } from "../../src/engine/template.js";
import { urlValue } from "../../src/plugins/executors/http-request/request.js";
import { buildReply } from "../../src/dns/reply.js";
import { DnsResponse } from "../../src/dns/response.js";
import { encodeMessage } from "../../src/dns/message.js";

const once = (text: string, values: Record<string, string>): string => {
  const set = new TemplateSet();
  const t = set.compile(text);
  return render(
    t,
    set.keys.map((k) => values[k]),
  );
};

describe("syntax", () => {
  test("${key} and {key} name the same key; $$ and {{key}} are literal; other $ and braces stay as written", () => {
    const v = { qname: "a.example", rcode: "3" };
    expect(once("${qname}/{qname}", v)).toBe("a.example/a.example");
    expect(once("cost $$5, a lone $ and $x", v)).toBe("cost $5, a lone $ and $x");
    expect(once("{{qname}} is {qname}", v)).toBe("{qname} is a.example");
    expect(once('{"a":{"b":1}} {rcode} {other} { qname }', v)).toBe('{"a":{"b":1}} 3 {other} { qname }');
    expect(once("no keys", v)).toBe("no keys");
    expect(once("", v)).toBe("");
  });

  test("a set captures each key once, whatever the number of templates naming it", () => {
    const set = new TemplateSet();
    set.compile("${qname}-${qtype}");
    set.compile("{qtype}{qname}{marks}");
    expect(set.keys).toEqual(["qname", "qtype", "marks"]);
    expect(TemplateSet.all().keys).toEqual(TEMPLATE_KEYS);
  });

  test("an unknown ${key} and a ${ without } are ArgErrors at the given path", () => {
    const set = new TemplateSet();
    const err = (text: string): ArgError => {
      try {
        set.compile(text, ["headers", "X"]);
      } catch (e) {
        return e as ArgError;
      }
      throw new Error("compiled");
    };
    expect(err("${qnmae}")).toMatchObject({ path: ["headers", "X"], message: expect.stringMatching(/^unknown template key '\$\{qnmae\}' \(keys: qname, qtype, /) as string });
    expect(err("x ${qname").message).toBe("'${' without its '}' in template 'x ${qname'");
    // The short form is only ever a known key: anything else in braces is text.
    expect(() => set.compile("{qnmae}")).not.toThrow();
  });

  test("values in a URL are percent-encoded except : , @", () => {
    expect(urlValue("2001:db8::1")).toBe("2001:db8::1");
    expect(urlValue("1,2")).toBe("1,2");
    expect(urlValue("a b/c?d#e&f=g%")).toBe("a%20b%2Fc%3Fd%23e%26f%3Dg%25");
  });
});

describe("keys read from a query", () => {
  test("a question, no response, marks, cron attributes", () => {
    const ctx = syntheticContext("Www.Example", new Map<string, string | number>([["cron.plugin_tag", "nightly"], ["cron.job_name", "ads"], ["cron.trigger_kind", "manual"], ["cron.scheduled_at_unix_ms", 1700000000000]]));
    ctx.addMark(9);
    ctx.addMark(2);
    const set = TemplateSet.all();
    const got = Object.fromEntries(set.keys.map((k, i) => [k, set.capture(ctx)[i]]));
    expect(got).toEqual({
      qname: "www.example",
      qtype: "1",
      qtype_name: "A",
      qclass: "1",
      qclass_name: "IN",
      client_ip: "0.0.0.0",
      client_port: "0",
      server_name: "",
      url_path: "",
      marks: "2,9",
      has_resp: "false",
      rcode: "",
      rcode_name: "",
      resp_ip: "",
      cron_plugin_tag: "nightly",
      cron_job_name: "ads",
      cron_trigger_kind: "manual",
      cron_scheduled_at_unix_ms: "1700000000000",
    });
  });

  test("a response: rcode, its name, and the answer's addresses sorted", () => {
    const ctx = syntheticContext("x.example");
    const wire = encodeMessage(ctx.query);
    const reply = buildReply(ctx.query, wire, -1, 0);
    const resp = DnsResponse.fromWire(reply).message;
    const rr = (ip: number[], type: number) => ({ name: "x.example", type, class: 1, ttl: 60, data: Buffer.from(ip) });
    resp.answers.push(rr([192, 0, 2, 9], 1), rr([192, 0, 2, 1], 1), rr([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 28));
    ctx.response = DnsResponse.fromMessage(resp);
    const set = new TemplateSet();
    const t = set.compile("${has_resp} ${rcode} ${rcode_name} ${resp_ip}");
    expect(render(t, set.capture(ctx))).toBe("true 0 NOERROR 192.0.2.1,192.0.2.9,2001:db8::1");
  });
});
