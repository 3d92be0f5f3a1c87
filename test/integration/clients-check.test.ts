// `sluice check` on configurations with a `clients` provider: every mistake reported at its own line
// and column (unknown names in `client`, malformed identifiers, a second provider, a client named
// like a group, an identifier two clients claim), and only there; the documented configuration passes.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { checkConfig } from "../../src/app/app.js";
import { createCatalog } from "../../src/plugins/catalog.js";
import { checkErrors } from "../helpers/check.js";
import { apiYaml, startSluice, tempDir } from "../helpers/sluice.js";

/** `sluice check`'s errors for `yaml`, each as `line:column: message` (the file name cut). */
function errorsOf(yaml: string): string[] {
  const dir = tempDir();
  writeFileSync(join(dir, "sluice.yaml"), yaml);
  return checkErrors(join(dir, "sluice.yaml"))
    .split("\n")
    .map((l) => l.replace(/^.*sluice\.yaml:(\d+:\d+): error: /, "$1: ").replaceAll(dir + "/", ""));
}

const provider = (clients: string, more = ""): string => `plugins:
  - tag: clients
    type: clients
    args:
      clients:
${clients}
      groups:
        - { name: kids }
        - { name: guests, addresses: [192.168.50.0/24] }
${more}`;

const anna = `        - { name: anna, addresses: [192.168.1.37], groups: [kids] }`;

test("an unknown name in `client`: in a sequence's quick setup and in a declared matcher, at its line", () => {
  const errors = errorsOf(`${provider(anna)}  - tag: kids_only
    type: client
    args: [kids, nobody]
  - tag: named
    type: client
    args: { names: [anna, ana] }
  - tag: main
    type: sequence
    args:
      - { matches: "client annaa", exec: reject }
      - { matches: ["client kids guest"], exec: reject }
      - { matches: ["client anna guests", $kids_only, $named], exec: accept }
`);
  expect(errors).toEqual([
    "12:11: plugin 'kids_only': args.names[1]: unknown client or group 'nobody' (declared: anna, kids, guests)",
    "15:27: plugin 'named': args.names[1]: unknown client or group 'ana' (declared: anna, kids, guests)",
    "19:20: plugin 'main': args[0].matches: 'client annaa': unknown client or group 'annaa' (declared: anna, kids, guests)",
    "20:21: plugin 'main': args[1].matches[0]: 'client kids guest': unknown client or group 'guest' (declared: anna, kids, guests)",
  ]);
});

test("`client` without a clients provider", () => {
  expect(errorsOf(`plugins:\n  - tag: main\n    type: sequence\n    args:\n      - { matches: "client kids", exec: reject }\n`)).toEqual([
    "5:20: plugin 'main': args[0].matches: 'client kids': no `clients` provider declares clients or groups: add one (docs/plugins.md#clients)",
  ]);
});

test("malformed MACs, CIDRs, ids and names in the provider's args, each at its line", () => {
  const errors = errorsOf(
    provider(
      `${anna}
        - { name: tv, macs: ["aa:bb:cc:dd:ee:zz", "aa:bb:cc:dd:ee"] }
        - { name: lab, addresses: [192.168.1.300/24, "10.0.0.0/33"] }
        - { name: phone, ids: [annas_phone, -phone, Phone] }
        - { name: "anna's phone" }
        - { name: desk, groups: [office] }`,
      `      trusted_forwarders: [router]
      tls_server_names: ["dns example net"]
      neighbour_refresh: often
`,
    ) + `  - { tag: main, type: sequence, args: [{ matches: "client tv lab phone desk", exec: reject }] }\n`,
  );
  expect(errors).toEqual([
    "7:30: plugin 'clients': args.clients[1].macs[0]: 'aa:bb:cc:dd:ee:zz' is not a MAC address (six hex pairs: aa:bb:cc:dd:ee:ff)",
    "7:51: plugin 'clients': args.clients[1].macs[1]: 'aa:bb:cc:dd:ee' is not a MAC address (six hex pairs: aa:bb:cc:dd:ee:ff)",
    "8:36: plugin 'clients': args.clients[2].addresses[0]: '192.168.1.300/24' is not an IP address or CIDR",
    "8:54: plugin 'clients': args.clients[2].addresses[1]: '10.0.0.0/33' has a bad prefix length (0-32 for IPv4)",
    "9:32: plugin 'clients': args.clients[3].ids[0]: 'annas_phone' is not a client id (one DNS label: letters, digits, inner hyphens, at most 63)",
    "9:45: plugin 'clients': args.clients[3].ids[1]: '-phone' is not a client id (one DNS label: letters, digits, inner hyphens, at most 63)",
    "10:19: plugin 'clients': args.clients[4].name: 'anna's phone' is not a name (letters, digits, '.', '_', '-'; at most 63; no spaces)",
    "11:34: plugin 'clients': args.clients[5].groups[0]: unknown group 'office' (groups: kids, guests)",
    "15:28: plugin 'clients': args.trusted_forwarders[0]: 'router' is not an IP address or CIDR",
    "16:26: plugin 'clients': args.tls_server_names[0]: 'dns example net' is not a host name",
    "17:26: plugin 'clients': args.neighbour_refresh: 'often' is not a duration (examples: 30, 500ms, 5s, 10m, 1h, 1d)",
  ]);
});

test("a second clients provider, a client named like a group, an identifier two clients claim", () => {
  const errors = errorsOf(
    provider(`${anna}
        - { name: guests, addresses: [10.0.0.9] }
        - { name: tv, macs: ["AA-BB-CC-DD-EE-01"], ids: [tv] }
        - { name: tv2, macs: ["aa:bb:cc:dd:ee:01"], ids: [TV], addresses: ["::ffff:192.168.1.37"] }
        - { name: tv, addresses: [10.0.0.1] }`) + `  - tag: more
    type: clients
    args: { clients: [{ name: bob }] }
  - { tag: main, type: sequence, args: [{ matches: "client anna tv", exec: reject }] }
`,
  );
  expect(errors).toEqual([
    "7:19: plugin 'clients': args.clients[1].name: 'guests' names a group too: `client guests` must mean one of them",
    "9:76: plugin 'clients': args.clients[3].addresses[0]: address ::ffff:192.168.1.37 already identifies client 'anna'",
    "9:31: plugin 'clients': args.clients[3].macs[0]: MAC aa:bb:cc:dd:ee:01 already identifies client 'tv'",
    "9:59: plugin 'clients': args.clients[3].ids[0]: id tv already identifies client 'tv'",
    "10:19: plugin 'clients': args.clients[4].name: client 'tv' is declared twice",
    "15:11: plugin 'more': a configuration has one 'clients' plugin (the first is 'clients' at sluice.yaml:2:5)",
  ]);
});

test("`pause` names declared matchers only", () => {
  expect(errorsOf(provider(anna, "      pause: [$ads, main]\n") + `  - { tag: main, type: sequence, args: [{ exec: accept }] }\n`)).toEqual([
    "10:15: plugin 'clients': args.pause[0] references missing plugin 'ads'",
    "10:21: plugin 'clients': args.pause[1] expects a matcher, but 'main' is an executor (type 'sequence')",
  ]);
});

test("the configuration in docs/plugins.md's clients section passes", () => {
  const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "plugins.md"), "utf8");
  const section = doc.slice(doc.indexOf("\n### clients\n"));
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  expect(yaml).toMatch(/type: clients/);
  const dir = tempDir();
  writeFileSync(join(dir, "sluice.yaml"), yaml);
  expect(() => checkConfig(join(dir, "sluice.yaml"), createCatalog())).not.toThrow();
});

test("through the API, a malformed MAC, CIDR or schedule is a 400 whose diagnostics name the field at its line", async () => {
  const s = await startSluice(apiYaml("black_hole 10.0.0.1"));
  try {
    const text = `plugins:
  - tag: clients
    type: clients
    args:
      clients: [{ name: anna, addresses: [192.168.1.0/33], macs: ["aa:bb"] }]
  - tag: bedtime
    type: schedule
    args: { windows: ["Mon-Fry 21:00-07:00"], time_zone: Europe/Berlin }
  - { tag: main, type: sequence, args: [{ matches: ["client anna", "schedule Mon 25:00-07:00"], exec: reject }] }
`;
    const r = await fetch(`${s.apiUrl}/api/config/validate`, { method: "POST", headers: { "content-type": "application/yaml" }, body: text });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { code: string; diagnostics: string[] };
    expect(body.code).toBe("config_validate_failed");
    const lines = body.diagnostics.map((d) => d.replace(/^<config>:/, ""));
    expect(lines).toEqual([
      expect.stringMatching(/^5:\d+: error: plugin 'clients': args\.clients\[0\]\.addresses\[0\]: .*192\.168\.1\.0\/33/),
      expect.stringMatching(/^5:\d+: error: plugin 'clients': args\.clients\[0\]\.macs\[0\]: 'aa:bb' is not a MAC address/),
      expect.stringMatching(/^8:\d+: error: plugin 'bedtime': args\.windows\[0\]: .*Fry/),
      expect.stringMatching(/^9:\d+: error: plugin 'main': .*schedule Mon 25:00-07:00/),
    ]);
  } finally {
    await s.stop();
  }
});
