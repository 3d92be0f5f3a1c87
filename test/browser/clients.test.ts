// The Clients page in a real browser (Chromium via playwright-core) against a real Sluice with a
// `clients` provider and a query recorder: a client seen at 127.0.0.1 is named from the page and put in
// a group, and its next queries show by that name in the Query log (the address on hover) and in the
// Overview's top clients, the group filter narrowing both; pausing the group (15 min, until a chosen
// time) shows the pause's end time and turns its blocking off until Resume; the client's groups change,
// and removed it is a seen client again. One page throughout; no console error.
import { afterAll, beforeAll, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { apiJson, committed } from "../integration/recorder-helpers.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type TestBrowser, type WatchedPage } from "./browser.js";

const CONFIG = `
api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: domain_set, args: { exps: ["domain:ads.example"] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - tag: clients
    type: clients
    args:
      clients:
        - { name: tv, addresses: [192.0.2.10] }
      groups: [{ name: kids }, { name: guests }]
      pause: [blocked]
      neighbour_refresh: 0s
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: ["client kids", "$blocked"], exec: reject 3 }
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;

/** The rcode of `name` asked from 127.0.0.1: 3 while the kids' blocking applies to it, else 0. */
const rcode = async (name: string): Promise<number> => rcodeOf(await query(s.port("udp"), name));

beforeAll(async () => {
  s = await startSluice(CONFIG);
  // Seen, not named: four queries, the ads one answered (not in a group yet).
  for (const name of ["www.example.net", "www.example.net", "www.example.net", "ads.example"]) expect(await rcode(name)).toBe(0);
  await committed(s, "rec", 4);
  browser = await launchBrowser();
  w = await browser.open();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

async function visit(hash: string): Promise<void> {
  await w.page.goto("about:blank");
  await w.page.goto(`${s.apiUrl}/#/${hash}`);
  await w.page.locator("main h1").first().waitFor();
}

test("a seen client named from the Clients page shows by its name in the Query log and the Overview's top clients", { timeout: 60_000 }, async () => {
  const page = w.page;
  await visit("clients");
  expect(await page.locator("nav[aria-label=Pages] a").allTextContents()).toContain("Clients");
  // The declared client is listed as such; the seen one can be named.
  expect(await page.locator("[data-testid=named-clients] tr[data-name=tv]").getAttribute("data-source")).toBe("config");
  const seen = page.locator("[data-testid=seen-clients] tr[data-address='127.0.0.1']");
  expect(await seen.locator("td[data-label=Queries]").textContent()).toBe("4");
  await seen.getByTestId("seen-name").click();
  const form = page.getByTestId("name-form");
  await form.getByTestId("name-input").fill("laptop");
  await form.locator("input[data-group=kids]").check();
  await w.screenshot("clients-name-form");
  await form.getByTestId("name-save").click();
  expect(await page.getByTestId("clients-message").textContent()).toBe("Named laptop (kids).");
  const named = page.locator("[data-testid=named-clients] tr[data-name=laptop]");
  expect(await named.getAttribute("data-source")).toBe("api");
  expect(await named.getByTestId("client-groups").textContent()).toBe("kids");
  expect(await page.locator("[data-testid=seen-clients] tr[data-address='127.0.0.1']").count()).toBe(0);

  // Now in kids: its ads query is refused, and three queries are recorded with its name.
  expect(await rcode("ads.example")).toBe(3);
  expect(await rcode("www.example.net")).toBe(0);
  expect(await rcode("www.example.net")).toBe(0);
  await committed(s, "rec", 7);

  await visit("queries?group=kids");
  const names = page.getByTestId("records-table").locator("tbody td[data-label=Client] .client-name");
  await expect.poll(() => names.count()).toBe(3);
  expect(new Set(await names.allTextContents())).toEqual(new Set(["laptop"]));
  expect(await names.first().getAttribute("title")).toBe("127.0.0.1 · kids");
  expect(await page.getByTestId("q-group").inputValue()).toBe("kids");
  await w.screenshot("clients-query-log");

  // The Overview: the named client by name (its address on hover), its unnamed queries by address.
  await visit("overview");
  const top = page.getByTestId("top-clients");
  await top.locator("li[data-key=laptop]").waitFor();
  expect(await top.locator("li").evaluateAll((lis) => lis.map((li) => `${li.getAttribute("data-key")}=${li.getAttribute("data-count")}`))).toEqual(["127.0.0.1=4", "laptop=3"]);
  expect(await top.locator("li[data-key=laptop] .client-name").getAttribute("title")).toBe("127.0.0.1");
  // The group filter applies to every panel.
  await page.getByTestId("filter-group").selectOption("kids");
  await page.getByRole("button", { name: "Apply" }).click();
  await page.locator("[data-testid=overview-total][data-count='3']").waitFor();
  expect(await page.getByTestId("overview-filter").textContent()).toContain("from clients in group kids");
  await w.screenshot("clients-overview");
  expect(w.problems()).toEqual([]);
});

test("a group pause shows its end time and turns the group's blocking off until Resume; an API-named client changes groups and is removed", { timeout: 60_000 }, async () => {
  const page = w.page;
  await visit("clients");
  const kids = page.getByTestId("group-kids-pause");
  await kids.locator("button[data-duration='15m']").click();
  const state = page.getByTestId("group-kids-state");
  await page.locator("[data-testid=group-kids-state][data-paused=true]").waitFor();
  const { groups } = await apiJson<{ groups: { name: string; paused_until_ms: number | null }[] }>(s, "/api/plugins/clients/groups");
  const until = groups.find((g) => g.name === "kids")?.paused_until_ms ?? 0;
  expect(Math.abs(until - (Date.now() + 15 * 60_000))).toBeLessThan(10_000);
  // The end time as the page's locale writes it.
  const shown = await page.evaluate((ms) => new Date(ms).toLocaleString(), until);
  expect(await state.textContent()).toContain(`until ${shown}`);
  expect(await state.locator("time").getAttribute("datetime")).toBe(new Date(until).toISOString());
  expect(await rcode("ads.example")).toBe(0);
  await w.screenshot("clients-paused");

  await page.getByTestId("group-kids-resume").click();
  await page.locator("[data-testid=group-kids-state][data-paused=false]").waitFor();
  expect(await rcode("ads.example")).toBe(3);

  // Until a chosen time (a minute of the local clock, two hours on).
  const chosen = Math.floor((Date.now() + 2 * 3_600_000) / 60_000) * 60_000;
  await kids.getByRole("button", { name: "Until…" }).click();
  await page.getByTestId("group-kids-until").fill(await page.evaluate((ms) => new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 16), chosen));
  await kids.getByRole("button", { name: "Pause", exact: true }).click();
  await page.locator("[data-testid=group-kids-state][data-paused=true]").waitFor();
  // The page sends the seconds from now to then: the end is that minute, give or take the request's time.
  expect(Math.abs(Date.parse((await state.locator("time").getAttribute("datetime")) ?? "") - chosen)).toBeLessThan(2000);
  await page.getByTestId("group-kids-resume").click();
  await page.locator("[data-testid=group-kids-state][data-paused=false]").waitFor();

  // The API-named client changes groups, then goes back to the seen clients when removed.
  const laptop = page.locator("[data-testid=named-clients] tr[data-name=laptop]");
  await laptop.getByRole("button", { name: "Edit the groups of laptop" }).click();
  const groupsForm = page.getByTestId("groups-form");
  await groupsForm.locator("input[data-group=guests]").check();
  await groupsForm.getByRole("button", { name: "Save groups" }).click();
  await expect.poll(() => laptop.getByTestId("client-groups").textContent()).toBe("kids, guests");
  await laptop.getByRole("button", { name: "Remove laptop" }).click();
  await laptop.getByRole("button", { name: "Yes, remove laptop" }).click();
  await page.locator("[data-testid=seen-clients] tr[data-address='127.0.0.1']").waitFor();
  expect(await laptop.count()).toBe(0);

  // A visible focus on every stop, and the page fits a phone.
  expect((await tabThrough(page, 14)).filter((f) => !f.visible && f.element !== "body")).toEqual([]);
  await page.setViewportSize(PHONE);
  expect(await overflow(page)).toEqual([]);
  await w.screenshot("clients-phone");
  await page.setViewportSize(DESKTOP);
  await w.screenshot("clients");
  expect(w.problems()).toEqual([]);
});
