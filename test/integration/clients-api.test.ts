// Runtime control of the `clients` provider over real HTTP and DNS (docs/plugins.md, "clients: runtime
// control"): the list of declared, named and seen clients (queries come from 127.0.0.x sources), naming a
// seen client so that its next query is in its group, changing and forgetting it, 400s that name the
// field, a group pause that turns the `pause` matchers off for that group alone and ends by itself, host
// names from a PTR resolver, and the state surviving a configuration reload.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { replyTo } from "../../src/dns/message.js";
import { WireWriter } from "../../src/dns/writer.js";
import { rcodeFrom } from "../helpers/client-source.js";
import { startResponder, type Responder } from "../helpers/responder.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { HeldFile } from "../model/harness.js";

const heldTag = (at: "before" | "after" | undefined): string => (at === "after" ? "zbig" : "big");

// rcodes: 3 = a kids client asking for an ad; 4 = a kids client; 5 = an ad; 2 = anything else.
const KIDS_AD = 3;
const KIDS = 4;
const AD = 5;
const OTHER = 2;

/**
 * `held`: a domain set read from a FIFO (test/model/harness.ts HeldFile), created before or after the
 * clients provider. Plugins without dependencies are made in the order of their tags, and the provider
 * depends on its `pause` matchers: to come before `zbig`, it has none.
 */
const config = (ptrPort: number, held: { file: string; at: "before" | "after" } | null = null): string => {
  const tag = heldTag(held?.at);
  const set = held ? `  - { tag: ${tag}, type: domain_set, args: { files: [${held.file}] } }\n` : "";
  return `api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: qname, args: ["domain:ads.test"] }
${held?.at === "before" ? set : ""}  - tag: clients
    type: clients
    args:
      clients:
        - { name: tv, addresses: [127.0.0.2], groups: [kids] }
      groups:
        - { name: kids }
        - { name: guests, addresses: [127.0.0.64/26] }
${held?.at === "after" ? "" : "      pause: [ads]\n"}      neighbour_refresh: 0s
      hostnames: 127.0.0.1:${ptrPort}
      hostname_interval: 100ms
      state_interval: 1h
${held?.at === "after" ? set : ""}  - tag: main
    type: sequence
    args:
${held ? `      - { matches: "qname $${tag}", exec: reject 9 }\n` : ""}      - { matches: ["client kids", "$ads"], exec: reject 3 }
      - { matches: "client kids", exec: reject 4 }
      - { matches: "$ads", exec: reject 5 }
      - exec: reject 2
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;
};

let s: RunningSluice;
let ptr: Responder;
beforeAll(async () => {
  ptr = await startResponder((q) => {
    const reply = replyTo(q);
    if (q.questions[0]?.name.toLowerCase() === "5.0.0.127.in-addr.arpa") {
      const w = new WireWriter();
      w.reset(false);
      w.name("laptop.lan");
      reply.answers.push({ name: q.questions[0].name, type: 12, class: 1, ttl: 60, data: w.finish() });
    } else reply.flags = (reply.flags & ~0x0f) | 3;
    return reply;
  });
  s = await startSluice(config(ptr.port));
});
afterAll(async () => {
  await s.stop();
  await ptr.close();
});

interface Reply {
  status: number;
  json: Record<string, unknown>;
}
async function call(method: string, path: string, body?: unknown): Promise<Reply> {
  const res = await s.api(`/api/plugins/clients/${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const udp = (): number => s.udpPort;
const stateFile = (): Record<string, unknown[]> => JSON.parse(readFileSync(join(s.dir, "clients.state.json"), "utf8")) as Record<string, unknown[]>;
type Listing = { clients: { name: string; source: string; groups: string[]; seen: Record<string, unknown> | null }[]; seen: Record<string, unknown>[]; groups: { name: string; members: string[]; paused_until_ms: number | null }[] };
const listing = async (): Promise<Listing> => (await call("GET", "clients")).json as unknown as Listing;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

test("the list shows the declared clients and the clients seen, each with what its queries showed; PTR names come from the resolver", async () => {
  expect(await rcodeFrom("127.0.0.2", udp(), "x.ads.test")).toBe(KIDS_AD);
  expect(await rcodeFrom("127.0.0.5", udp())).toBe(OTHER);
  expect(await rcodeFrom("127.0.0.5", udp())).toBe(OTHER);
  await sleep(5);
  const before = Date.now();
  expect(await rcodeFrom("127.0.0.66", udp())).toBe(OTHER);
  const list = await listing();
  expect(list.clients).toEqual([
    { name: "tv", source: "config", addresses: ["127.0.0.2"], macs: [], ids: [], groups: ["kids"], seen: { address: "127.0.0.2", mac: null, id: null, hostname: null, first_seen_ms: expect.any(Number) as number, last_seen_ms: expect.any(Number) as number, queries: 1 } },
  ]);
  // Most recent first; 127.0.0.66 is in `guests` by its address, and still only seen.
  expect(list.seen.map((c) => [c.key, c.queries])).toEqual([["127.0.0.66", 1], ["127.0.0.5", 2]]);
  expect(list.seen[0].last_seen_ms).toBeGreaterThanOrEqual(before);
  expect(list.groups).toEqual([
    { name: "kids", addresses: [], members: ["tv"], paused_until_ms: null },
    { name: "guests", addresses: ["127.0.0.64/26"], members: [], paused_until_ms: null },
  ]);
  // hostname_interval is 100ms: the resolver knows 127.0.0.5 (and answers NXDOMAIN for the others).
  const named = await eventually("the PTR name of 127.0.0.5", async () => (await listing()).seen.find((c) => c.key === "127.0.0.5" && c.hostname !== null));
  expect(named.hostname).toBe("laptop.lan");
  expect((await listing()).seen.find((c) => c.key === "127.0.0.66")?.hostname).toBeNull();
  expect((await call("GET", "groups")).json).toEqual({ ok: true, groups: list.groups });
});

test("naming a seen client: its next query is in its group, and the list shows it with what was seen before", async () => {
  expect(await rcodeFrom("127.0.0.7", udp())).toBe(OTHER);
  const named = await call("POST", "clients", { name: "laptop", addresses: ["127.0.0.7"], macs: ["AA-BB-CC-DD-EE-07"], groups: ["kids"] });
  expect(named.status).toBe(201);
  expect(named.json).toEqual({
    ok: true,
    client: { name: "laptop", source: "api", addresses: ["127.0.0.7"], macs: ["aa:bb:cc:dd:ee:07"], ids: [], groups: ["kids"], seen: expect.objectContaining({ address: "127.0.0.7", queries: 1 }) as unknown },
  });
  expect(await rcodeFrom("127.0.0.7", udp())).toBe(KIDS);
  expect(await rcodeFrom("127.0.0.7", udp(), "ads.test")).toBe(KIDS_AD);
  const list = await listing();
  expect(list.clients.map((c) => [c.name, c.source])).toEqual([["tv", "config"], ["laptop", "api"]]);
  expect(list.clients[1].seen).toMatchObject({ address: "127.0.0.7", queries: 3 });
  expect(list.seen.map((c) => c.key)).not.toContain("127.0.0.7");
  expect(list.groups[0].members).toEqual(["tv", "laptop"]);
  // Written before the answer.
  expect(stateFile().named).toEqual([{ name: "laptop", addresses: ["127.0.0.7"], macs: ["aa:bb:cc:dd:ee:07"], ids: [], groups: ["kids"] }]);

  // PUT replaces the lists it names; the others stay.
  const changed = await call("PUT", "clients/laptop", { groups: [] });
  expect([changed.status, changed.json.client]).toEqual([200, expect.objectContaining({ name: "laptop", addresses: ["127.0.0.7"], macs: ["aa:bb:cc:dd:ee:07"], groups: [] })]);
  expect(await rcodeFrom("127.0.0.7", udp())).toBe(OTHER);
  expect((await call("PUT", "clients/laptop", { groups: ["kids"], addresses: ["127.0.0.8"] })).status).toBe(200);
  expect(await rcodeFrom("127.0.0.8", udp())).toBe(KIDS);
  expect(await rcodeFrom("127.0.0.7", udp())).toBe(OTHER);

  // A declared client is changed in the configuration; an unknown one is not found.
  expect(await call("PUT", "clients/tv", { groups: [] })).toMatchObject({ status: 409, json: { ok: false, code: "client_declared" } });
  expect(await call("DELETE", "clients/tv")).toMatchObject({ status: 409, json: { ok: false, code: "client_declared" } });
  expect(await call("PUT", "clients/nobody", { groups: [] })).toMatchObject({ status: 404, json: { ok: false, code: "client_not_found" } });

  expect(await call("DELETE", "clients/laptop")).toEqual({ status: 200, json: { ok: true } });
  expect(await call("DELETE", "clients/laptop")).toMatchObject({ status: 404, json: { code: "client_not_found" } });
  expect(await rcodeFrom("127.0.0.8", udp())).toBe(OTHER);
  // A seen client again, with every query it made under its name (6 with this one).
  expect((await listing()).seen.find((c) => c.key === "127.0.0.8")).toMatchObject({ address: "127.0.0.8", queries: 6 });
  expect(stateFile().named).toEqual([]);
  expect((await listing()).clients.map((c) => c.name)).toEqual(["tv"]);
});

test("bad bodies are refused with 400 naming the field, and nothing changes", async () => {
  const cases: [unknown, string][] = [
    [{ name: "phone", macs: ["zz"] }, "macs[0]: 'zz' is not a MAC address"],
    [{ name: "phone", addresses: ["127.0.0.9"], groups: ["kids", "x"] }, "groups[1]: unknown group 'x'"],
    [{ name: "a phone", addresses: ["127.0.0.9"] }, "name: 'a phone' is not a name"],
    [{ name: "phone", addresses: ["127.0.0.300"] }, "addresses[0]: "],
    [{ name: "phone", ids: ["not an id"] }, "ids[0]: 'not an id' is not a client id"],
    [{ name: "phone", addresses: ["127.0.0.2"] }, "addresses[0]: 127.0.0.2 already identifies client 'tv'"],
    [{ name: "phone" }, "addresses: a client needs at least one address, MAC or id"],
    [{ name: "phone", addresses: "127.0.0.9" }, "addresses"],
    [{ name: "phone", addresses: ["127.0.0.9"], colour: "red" }, "colour"],
    [{ addresses: ["127.0.0.9"] }, "name"],
  ];
  for (const [body, message] of cases) {
    const r = await call("POST", "clients", body);
    expect([r.status, r.json.code], JSON.stringify(body)).toEqual([400, "invalid_client"]);
    expect(r.json.message, JSON.stringify(body)).toContain(message);
  }
  const notJson = await s.api("/api/plugins/clients/clients", { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
  expect([notJson.status, ((await notJson.json()) as { code: string }).code]).toEqual([400, "invalid_client"]);
  // A name taken by a declared client, a group, or a named client.
  for (const name of ["tv", "kids"]) expect(await call("POST", "clients", { name, addresses: ["127.0.0.9"] }), name).toMatchObject({ status: 409, json: { code: "client_exists" } });
  expect((await call("POST", "clients", { name: "phone", addresses: ["127.0.0.9"] })).status).toBe(201);
  expect(await call("POST", "clients", { name: "phone", addresses: ["127.0.0.10"] })).toMatchObject({ status: 409, json: { code: "client_exists" } });
  expect(await call("PUT", "clients/phone", { macs: ["nope"] })).toMatchObject({ status: 400, json: { code: "invalid_client", message: expect.stringContaining("macs[0]: 'nope' is not a MAC address") as string } });
  expect(await call("PUT", "clients/phone", { addresses: [] })).toMatchObject({ status: 400, json: { code: "invalid_client" } });
  expect((await listing()).clients.find((c) => c.name === "phone")).toMatchObject({ addresses: ["127.0.0.9"], macs: [] });
  expect((await call("DELETE", "clients/phone")).status).toBe(200);
  // Pauses: the duration is checked, the group must be declared.
  for (const [body, message] of [[{ duration: "0ms" }, "duration: a pause lasts from 1ms to 7d"], [{ duration: "8d" }, "duration: a pause lasts"], [{ duration: "soon" }, "duration: 'soon' is not a duration"], [{}, "duration"], [{ duration: true }, "duration"]] as const) {
    const r = await call("POST", "groups/kids/pause", body);
    expect([r.status, r.json.code], JSON.stringify(body)).toEqual([400, "invalid_pause"]);
    expect(r.json.message).toContain(message);
  }
  expect(await call("POST", "groups/nope/pause", { duration: "1m" })).toMatchObject({ status: 404, json: { code: "group_not_found" } });
  expect(await call("DELETE", "groups/nope/pause")).toMatchObject({ status: 404, json: { code: "group_not_found" } });
  expect((await call("GET", "groups")).json.groups).toEqual([expect.objectContaining({ paused_until_ms: null }), expect.objectContaining({ paused_until_ms: null })]);
});

test("a group pause turns the pause matchers off for that group alone, and ends by itself", async () => {
  expect(await rcodeFrom("127.0.0.2", udp(), "ads.test")).toBe(KIDS_AD);
  const sent = Date.now();
  const paused = await call("POST", "groups/kids/pause", { duration: "500ms" });
  expect(paused).toEqual({ status: 200, json: { ok: true, group: "kids", paused_until_ms: expect.any(Number) as number } });
  const until = paused.json.paused_until_ms as number;
  expect(until).toBeGreaterThanOrEqual(sent + 500);
  expect(until).toBeLessThanOrEqual(Date.now() + 500);
  // `client kids` still matches; `$ads` does not, for kids only.
  expect(await rcodeFrom("127.0.0.2", udp(), "ads.test")).toBe(KIDS);
  expect(await rcodeFrom("127.0.0.9", udp(), "ads.test")).toBe(AD);
  expect((await call("GET", "groups")).json.groups).toEqual([expect.objectContaining({ name: "kids", paused_until_ms: until }), expect.objectContaining({ name: "guests", paused_until_ms: null })]);
  expect(stateFile().pauses).toEqual([{ group: "kids", paused_until_ms: until }]);
  expect(Date.now(), "the checks took longer than the pause").toBeLessThan(until);
  await eventually("the pause's end", async () => ((await call("GET", "groups")).json.groups as Listing["groups"])[0].paused_until_ms === null || undefined);
  expect(Date.now()).toBeGreaterThanOrEqual(until);
  expect(await rcodeFrom("127.0.0.2", udp(), "ads.test")).toBe(KIDS_AD);
  await eventually("the file without the pause", () => Promise.resolve(stateFile().pauses.length === 0 || undefined));

  // Ended early through the API.
  expect((await call("POST", "groups/guests/pause", { duration: "1h" })).status).toBe(200);
  expect(await rcodeFrom("127.0.0.70", udp(), "ads.test")).toBe(OTHER);
  expect(await call("DELETE", "groups/guests/pause")).toEqual({ status: 200, json: { ok: true, group: "guests", paused_until_ms: null } });
  expect(await rcodeFrom("127.0.0.70", udp(), "ads.test")).toBe(AD);
  expect(stateFile().pauses).toEqual([]);
});

/** Reloads into `yaml`, whose build waits on `held` until `during` has run; resolves once the new configuration serves. */
async function reloadHeld(yaml: string, tag: string, held: HeldFile, during: () => Promise<void>): Promise<void> {
  writeFileSync(join(s.dir, "sluice.yaml"), yaml);
  const g = s.app.generation;
  expect((await s.api("/api/reload", { method: "POST" })).status).toBe(202);
  // The build has reached the held set once the actor of the generation's set exists.
  await eventually("the held build", async () => {
    const actors = ((await (await s.api("/api/actors")).json()) as { actors: { id: string }[] }).actors;
    return actors.some((a) => a.id.startsWith(`runtime:${g + 1}/plugin:${tag}`)) || undefined;
  });
  await during();
  held.grant();
  await eventually("the new configuration", () => Promise.resolve(s.app.generation > g || undefined));
}

test("named clients and pauses survive configuration reloads; a change made while one runs is kept or refused, never lost", async () => {
  expect((await call("POST", "clients", { name: "desk", addresses: ["127.0.0.11"], groups: ["kids"] })).status).toBe(201);
  const until = (await call("POST", "groups/kids/pause", { duration: "1h" })).json.paused_until_ms as number;
  expect(await rcodeFrom("127.0.0.11", udp(), "ads.test")).toBe(KIDS);

  // The new configuration's provider is not made yet: the running one takes the change, and hands it over.
  const fifo = join(s.dir, "held.txt");
  const held = new HeldFile(fifo, "full:held.test\n");
  let list: Listing;
  try {
    await reloadHeld(config(ptr.port, { file: fifo, at: "before" }), heldTag("before"), held, async () => {
      expect((await call("POST", "clients", { name: "lamp", addresses: ["127.0.0.12"], groups: ["kids"] })).status).toBe(201);
      expect(await rcodeFrom("127.0.0.12", udp())).toBe(KIDS);
    });
    expect(await rcodeFrom("127.0.0.11", udp(), "ads.test")).toBe(KIDS);
    expect(await rcodeFrom("127.0.0.12", udp())).toBe(KIDS);
    list = await listing();
    expect(list.clients.map((c) => c.name)).toEqual(["tv", "desk", "lamp"]);
    expect(list.clients[1].seen).toMatchObject({ queries: 2 });
    expect(list.groups[0].paused_until_ms).toBe(until);
    // The new generation wrote what it took over.
    await eventually("the state file of the new generation", () => Promise.resolve(stateFile().named.length === 2 || undefined));

    // The new configuration's provider is made (it has taken over the state): the running one refuses changes until the swap.
    // (Without `pause` matchers: the pause stays, it only has nothing to turn off.)
    await reloadHeld(config(ptr.port, { file: fifo, at: "after" }), heldTag("after"), held, async () => {
      const refused = await call("DELETE", "clients/lamp");
      expect([refused.status, refused.json.code, refused.json.message]).toEqual([503, "plugin_unavailable", expect.stringContaining("a reload is replacing this clients provider") as string]);
    });
  } finally {
    await held.close();
  }
  list = await listing();
  expect(list.clients.map((c) => c.name)).toEqual(["tv", "desk", "lamp"]);
  expect(list.groups[0].paused_until_ms).toBe(until);
  // The new generation writes what it took over once, at start.
  const state = await eventually("the new generation's write", async () => {
    const actors = ((await (await s.api("/api/actors")).json()) as { actors: { id: string; state: { running?: { writer: string; hostnames: string } } }[] }).actors;
    const found = actors.find((a) => a.id === `runtime:${s.app.generation}/plugin:clients/clients:clients`)?.state;
    // (A round of PTR lookups, every 100 ms, may be under way.)
    return found?.running?.writer === "idle" && found.running.hostnames === "waiting" ? found : undefined;
  });
  expect(state).toEqual({ running: { writer: "idle", pauses: "timing", neighbours: "off", hostnames: "waiting" } });
  expect((await call("DELETE", "clients/lamp")).status).toBe(200);
  expect(await call("DELETE", "groups/kids/pause")).toMatchObject({ status: 200 });
  expect((await call("DELETE", "clients/desk")).status).toBe(200);
  expect(stateFile()).toMatchObject({ named: [], pauses: [] });
});

test("OpenAPI lists every route with its schemas", async () => {
  const paths = ((await (await s.api("/api/openapi.json")).json()) as { paths: Record<string, Record<string, { responses: Record<string, unknown>; requestBody?: unknown }>> }).paths;
  const want: [string, string, string[]][] = [
    ["/api/plugins/{tag}/clients", "get", ["200"]],
    ["/api/plugins/{tag}/clients", "post", ["201", "400", "409", "500"]],
    ["/api/plugins/{tag}/clients/{name}", "put", ["200", "400", "404", "409"]],
    ["/api/plugins/{tag}/clients/{name}", "delete", ["200", "404", "409"]],
    ["/api/plugins/{tag}/groups", "get", ["200"]],
    ["/api/plugins/{tag}/groups/{group}/pause", "post", ["200", "400", "404"]],
    ["/api/plugins/{tag}/groups/{group}/pause", "delete", ["200", "404"]],
  ];
  for (const [path, method, statuses] of want) {
    const op = paths[path]?.[method];
    expect(op, `${method} ${path}`).toBeDefined();
    expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining([...statuses, "503"]));
    if (method === "post" || method === "put") expect(op.requestBody, `${method} ${path}`).toBeDefined();
  }
});
