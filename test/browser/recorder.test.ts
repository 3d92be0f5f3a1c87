// The Overview and the Query log in a real browser (Chromium via playwright-core) against a real
// Sluice with a query recorder, fed with DNS traffic of a known shape from two clients (127.0.0.1 and
// ::1): the overview's totals, shares and distributions are the traffic's, its client/domain filter
// and time range apply to every panel; the query log filters and pages with the cursor, its live
// mode shows a query the test sends, and a record's detail shows the rule that matched and the
// executor that answered. Both pages fit 1280×800 and 390×844 with a visible focus and no console
// error. The desktop overview screenshot is the README's (docs/images/overview.png is a copy).
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { buildQuery, udpExchange } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { committed } from "../integration/recorder-helpers.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type TestBrowser, type WatchedPage } from "./browser.js";

const CONFIG = `
api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: domain_set, args: { exps: ["domain:ads.example"] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: $blocked, exec: reject 3 }
      - exec: black_hole 10.0.0.1 2001:db8::1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
  - { tag: udp6, type: udp_server, args: { entry: main, listen: "[::1]:0" } }
`;

/** The traffic: [client, name, type, times]. 20 queries: 15 from 127.0.0.1 (3 blocked), 5 from ::1. */
const TRAFFIC: [string, string, string, number][] = [
  ["127.0.0.1", "www.example.net", "A", 8],
  ["127.0.0.1", "www.example.net", "AAAA", 4],
  ["127.0.0.1", "ads.example", "A", 3],
  ["::1", "phone.example", "A", 5],
];
const TOTAL = 20;

let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;

async function query(client: string, name: string, type = "A"): Promise<void> {
  const answer = await udpExchange(s.port(client === "::1" ? "udp6" : "udp"), buildQuery(name, type), 3000, client);
  if (answer === null) throw new Error(`no answer for ${name} from ${client}`);
}

beforeAll(async () => {
  s = await startSluice(CONFIG);
  for (const [client, name, type, times] of TRAFFIC) for (let i = 0; i < times; i++) await query(client, name, type);
  await committed(s, "rec", TOTAL);
  browser = await launchBrowser();
  w = await browser.open();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

type Page = WatchedPage["page"];

async function visit(page: Page, hash: string): Promise<void> {
  await page.goto("about:blank");
  await page.goto(`${s.apiUrl}/#/${hash}`);
  await page.locator("main h1").first().waitFor();
}

/** The overview's figures once they show `total` queries. */
async function overviewAt(page: Page, total: number) {
  await page.locator(`[data-testid=overview-total][data-count="${total}"]`).waitFor();
  // A panel without rows shows a hint instead of a list: no entries.
  const counts = async (testId: string): Promise<Record<string, number>> => {
    const list = page.getByTestId(testId).locator("li");
    const pairs = await list.evaluateAll((lis) => lis.map((li): [string, number] => [li.getAttribute("data-key") ?? li.getAttribute("data-part") ?? "", Number(li.getAttribute("data-count"))]));
    return Object.fromEntries(pairs);
  };
  return {
    shares: await counts("overview-shares"),
    clients: await counts("top-clients"),
    domains: await counts("top-domains"),
    rcodes: await counts("rcodes"),
    qtypes: await counts("qtypes"),
    histogram: await counts("latency-histogram"),
  };
}

const sum = (o: Record<string, number>): number => Object.values(o).reduce((a, b) => a + b, 0);

/** Rows of the query log table: [qname, client, outcome]. */
const tableRows = (page: Page) =>
  page.getByTestId("records-table").locator("tbody tr").evaluateAll((trs) => trs.map((tr) => ({ id: Number(tr.getAttribute("data-id")), qname: tr.getAttribute("data-qname") ?? "" })));

describe("overview", { timeout: 60_000 }, () => {
  test("the charts and panels show the traffic's totals, shares and distributions", async () => {
    await visit(w.page, "overview");
    const o = await overviewAt(w.page, TOTAL);
    expect(o.shares).toEqual({ answered: 17, blocked: 3, error: 0, no_response: 0 });
    expect(o.clients).toEqual({ "127.0.0.1": 15, "::1": 5 });
    expect(o.domains).toEqual({ "www.example.net.": 12, "ads.example.": 3, "phone.example.": 5 });
    expect(o.rcodes).toEqual({ NOERROR: 17, NXDOMAIN: 3 });
    expect(o.qtypes).toEqual({ A: 16, AAAA: 4 });
    expect(sum(o.histogram)).toBe(TOTAL);
    // Both uPlot charts drew; the count chart covers the same queries (the last hour, by minute).
    expect(await w.page.locator(".chart canvas").count()).toBe(2);
    expect(await w.page.locator(".chart").first().getAttribute("aria-label")).toContain(`${TOTAL} in the chart's span`);
    await w.screenshot("overview");
    expect(w.problems()).toEqual([]);
  });

  test("a client filter applies to every panel, a picked domain narrows it further, and the range picker moves the window", async () => {
    await visit(w.page, "overview");
    await overviewAt(w.page, TOTAL);
    await w.page.getByTestId("filter-client").fill("::1");
    await w.page.getByRole("button", { name: "Apply" }).click();
    let o = await overviewAt(w.page, 5);
    expect(o).toMatchObject({ clients: { "::1": 5 }, domains: { "phone.example.": 5 }, rcodes: { NOERROR: 5 }, qtypes: { A: 5 } });
    expect(await w.page.getByTestId("overview-filter").textContent()).toContain("::1");
    await w.page.getByRole("button", { name: "Clear filter" }).click();
    await overviewAt(w.page, TOTAL);

    // A top domain is a button: it filters every panel by that name.
    await w.page.getByTestId("top-domains").getByRole("button", { name: "ads.example." }).click();
    o = await overviewAt(w.page, 3);
    expect(o).toMatchObject({ shares: { blocked: 3, answered: 0 }, clients: { "127.0.0.1": 3 }, rcodes: { NXDOMAIN: 3 } });
    expect(await w.page.getByTestId("filter-domain").inputValue()).toBe("ads.example.");
    await w.page.getByRole("button", { name: "Clear filter" }).click();

    // "Blocked" can mean a matcher matched instead of reject: the same three here.
    await w.page.getByTestId("blocked-by").selectOption("matcher:blocked");
    expect((await overviewAt(w.page, TOTAL)).shares).toMatchObject({ blocked: 3 });

    await w.page.locator("button[data-range='24h']").click();
    await w.page.locator("button[data-range='24h'][aria-pressed=true]").waitFor();
    await overviewAt(w.page, TOTAL);
    // A custom range that ended an hour ago holds none of the queries.
    await w.page.locator("button[data-range=custom]").click();
    const local = (ms: number) => new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await w.page.getByTestId("range-since").fill(local(Date.now() - 3 * 3_600_000));
    await w.page.getByTestId("range-until").fill(local(Date.now() - 3_600_000));
    await w.page.getByRole("button", { name: "Show" }).click();
    o = await overviewAt(w.page, 0);
    expect(o.shares).toEqual({ answered: 0, blocked: 0, error: 0, no_response: 0 });
    await w.screenshot("overview-custom-range");
    expect(w.problems()).toEqual([]);
  });
});

describe("query log", { timeout: 60_000 }, () => {
  test("filters by name, client, rcode and matched matcher, and pages with the cursor", async () => {
    await visit(w.page, "queries");
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(TOTAL);

    await w.page.getByTestId("q-qname").fill("www.example");
    await w.page.getByTestId("q-apply").click();
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(12);
    expect(new Set((await tableRows(w.page)).map((r) => r.qname))).toEqual(new Set(["www.example.net."]));

    await w.page.getByRole("button", { name: "Clear", exact: true }).click();
    await w.page.getByTestId("q-rcode").fill("NXDOMAIN");
    await w.page.getByTestId("q-matcher").fill("blocked");
    await w.page.getByTestId("q-apply").click();
    await expect.poll(async () => (await tableRows(w.page)).map((r) => r.qname)).toEqual(["ads.example.", "ads.example.", "ads.example."]);

    await w.page.getByRole("button", { name: "Clear", exact: true }).click();
    await w.page.getByTestId("q-client").fill("::1");
    await w.page.getByTestId("q-apply").click();
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(5);

    // Paging: 20 per page over the 20 records, then a page with what is left after more queries.
    // The Clear's own load (50 a page) is held back until the 20-a-page load has answered, so it answers last:
    // the table must keep the newer load's rows (it once showed all 25).
    const twenty = w.page.waitForResponse((r) => r.url().includes("/records?") && r.url().includes("limit=20"));
    await w.page.route(
      /\/records\?(.*&)?limit=50/,
      async (route) => {
        await twenty;
        await route.continue();
      },
      { times: 1 },
    );
    const clearsLoad = w.page.waitForResponse((r) => r.url().includes("/records?") && r.url().includes("limit=50"));
    await w.page.getByRole("button", { name: "Clear", exact: true }).click();
    for (let i = 0; i < 5; i++) await query("127.0.0.1", `page${i}.example`);
    await committed(s, "rec", TOTAL + 5);
    await w.page.getByTestId("records-limit").selectOption("20");
    await clearsLoad;
    // The newest page of 20 starts with the newest query.
    await expect.poll(async () => (await tableRows(w.page)).map((r, i) => (i === 0 ? r.qname : "")).join(",")).toBe(`page4.example.${",".repeat(19)}`);
    const first = await tableRows(w.page);
    expect(first).toHaveLength(20);
    await w.page.getByTestId("records-older").click();
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(5);
    const second = await tableRows(w.page);
    // Newest first across pages, each record once.
    expect(Math.max(...second.map((r) => r.id))).toBeLessThan(Math.min(...first.map((r) => r.id)));
    expect(await w.page.getByTestId("records-older").isDisabled()).toBe(true);
    await w.page.getByTestId("records-newer").click();
    await expect.poll(async () => (await tableRows(w.page))[0]?.id).toBe(first[0]?.id);
    await w.screenshot("query-log-paged");
    expect(w.problems()).toEqual([]);
  });

  test("a record's detail shows the rule that matched and the executor that answered, step by step", async () => {
    await visit(w.page, "queries?qname=ads.example");
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(3);
    await w.page.getByTestId("record-open").first().click();
    const detail = w.page.getByTestId("record-detail");
    await detail.getByTestId("record-steps").waitFor();
    expect(await detail.getByTestId("path-summary").textContent()).toBe("Rule 2 of main matched (blocked). Answered by reject (builtin, stop).");
    const steps = await detail.getByTestId("record-steps").locator("li[data-tag]").evaluateAll((lis) => lis.map((li) => `${li.getAttribute("data-kind")}:${li.getAttribute("data-tag")}:${li.getAttribute("data-outcome")}`));
    expect(steps).toEqual(["matcher:blocked:matched", "builtin:reject:stop"]);
    // No dynamic_domain_set in this configuration: no Block / Allow.
    expect(await detail.getByTestId("set-actions").count()).toBe(0);
    // Focus moves to the detail, for keyboard and screen reader users.
    expect(await w.page.evaluate(() => document.activeElement?.id)).toBe("record-title");
    await w.screenshot("record-detail");

    // An answered query that no matcher decided: the last executor answered.
    await visit(w.page, "queries?qname=phone.example");
    await expect.poll(async () => (await tableRows(w.page)).length).toBe(5);
    await w.page.getByTestId("record-open").first().click();
    await detail.getByTestId("record-steps").waitFor();
    expect(await detail.getByTestId("path-summary").textContent()).toBe("No rule with a matcher decided this query. Answered by black_hole (inline executor, next).");
    expect(await detail.getByTestId("record-steps").locator("li[data-tag=blocked]").getAttribute("data-outcome")).toBe("not_matched");
    await detail.getByTestId("record-close").click();
    expect(await detail.count()).toBe(0);
    expect(w.problems()).toEqual([]);
  });

  test("live mode shows a query as it is answered, and only those that match the filters", async () => {
    await visit(w.page, "queries?qname=live");
    await w.page.getByTestId("live-toggle").click();
    await w.page.getByTestId("live-state").getByText("live").waitFor();
    await query("127.0.0.1", "not-shown.example");
    await query("::1", "live-check.example", "AAAA");
    const row = w.page.locator("[data-testid=records-table] tr[data-qname='live-check.example.']");
    await row.waitFor();
    expect(await row.textContent()).toContain("::1");
    expect((await tableRows(w.page)).map((r) => r.qname)).toEqual(["live-check.example."]);
    await w.screenshot("query-log-live");
    await w.page.getByTestId("live-toggle").click();
    await w.page.getByTestId("records-older").waitFor();
    expect(w.problems()).toEqual([]);
  });
});

describe("layout", { timeout: 90_000 }, () => {
  test("both pages fit 1280×800 and 390×844 with a visible focus on every stop and no console error", async () => {
    for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      const view = await browser.open(viewport);
      await visit(view.page, "overview");
      await view.page.locator("[data-testid=overview-total]").waitFor();
      await view.page.locator(".chart canvas").first().waitFor();
      expect(await overflow(view.page), `overview at ${name}`).toEqual([]);
      await view.screenshot(`overview-${name}`);
      expect((await tabThrough(view.page, 16)).filter((f) => !f.visible && f.element !== "body"), `overview at ${name}`).toEqual([]);

      await visit(view.page, "queries");
      await view.page.getByTestId("records-table").waitFor();
      await view.page.getByTestId("record-open").first().click();
      await view.page.getByTestId("record-steps").waitFor();
      expect(await overflow(view.page), `query log at ${name}`).toEqual([]);
      await view.screenshot(`queries-${name}`);
      expect((await tabThrough(view.page, 16)).filter((f) => !f.visible && f.element !== "body"), `query log at ${name}`).toEqual([]);
      expect(await view.page.locator("nav[aria-label=Pages] a").allTextContents()).toEqual(["Overview", "Query log", "Logs", "Plugins", "Configuration", "System", "Audit"]);
      expect(view.problems(), name).toEqual([]);
      await view.page.close();
    }
  });
});
