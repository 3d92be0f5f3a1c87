// Roles in the dashboard, in a real browser against a real Sluice with three users (viewer, operator,
// admin; real scrypt hashes in api.http.auth.users), each signed in through the form in a browser
// context of its own (its own cookie): a viewer's pages show no write control (Configuration, Plugins
// with its matcher, provider, cache, rules, cron and download cards, the Upgrade card, Clients, System,
// the Query log's Block/Allow) and a write forced from the page is refused 403 forbidden_role; an
// operator has the runtime controls but not the configuration, Audit or Upgrade; an admin has all.
// Then the operator pauses a matcher on the Plugins page, and the admin's Audit page shows the row
// naming the operator and always_false, and the next change arriving live on top.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { query } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { committed } from "../integration/recorder-helpers.js";
import { ADMIN, OPERATOR, signInAs, usersYaml, VIEWER } from "./accounts.js";
import { launchBrowser, type ExpectedHttpError, type TestBrowser, type WatchedPage } from "./browser.js";


const config = (users: string): string => `
api:
  http:
    listen: 127.0.0.1:0
    auth:
${users}
plugins:
  - { tag: ads, type: domain_set, args: { files: [ads.txt] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - { tag: answers, type: cache, args: { size: 1000 } }
  - { tag: dyn, type: dynamic_domain_set, args: { path: dyn.txt } }
  - tag: clients
    type: clients
    args:
      clients: [{ name: tv, addresses: [192.0.2.10] }]
      groups: [{ name: kids }]
      pause: [blocked]
      neighbour_refresh: 0s
  - tag: nightly
    type: cron
    args:
      jobs: [{ name: report, schedule: "30 3 * * *", executors: ["sleep 10ms"] }]
  - tag: fetch
    type: download
    args:
      startup_if_missing: false
      downloads: [{ url: "http://127.0.0.1:9/none.txt", dir: lists }]
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - { matches: $blocked, exec: "black_hole 0.0.0.0 short_circuit" }
      - { matches: "qname $dyn", exec: reject 3 }
      - exec: $answers
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

/** The first probe of a fresh browser, before signing in, answers 401. */
const PROBE: ExpectedHttpError = { status: 401, path: "/api/session" };

/** Names of buttons that change something (none may show to a viewer). */
const WRITE = /^(Normal|Always true|Always false|Pause|Reload rules|Flush…|Delete|Remove|Clear all…|Add|Run now|Run|Run all|Save|Validate|Revert|Reload now|Check for updates|Name…|Assign groups…|Edit groups|Remove…|Resume|Until…|15 min|1 h|Block|Allow|Create token|Revoke…)$/;

let s: RunningSluice;
const browsers: TestBrowser[] = [];
const tabs: Record<string, WatchedPage> = {};

beforeAll(async () => {
  s = await startSluice(config(await usersYaml([VIEWER, OPERATOR, ADMIN])), { "ads.txt": "ads.example\n" });
  for (const name of ["www.example.net", "ads.example"]) await query(s.udpPort, name);
  // Each user in a browser context of their own: one cookie jar each.
  for (const u of [VIEWER, OPERATOR, ADMIN]) {
    const b = await launchBrowser();
    browsers.push(b);
    const w = await b.open();
    await w.page.goto(`${s.apiUrl}/#/system`);
    await signInAs(w, u);
    expect(w.problems([PROBE])).toEqual([]);
    tabs[u.name] = w;
  }
  const basic = `Basic ${Buffer.from(`${ADMIN.name}:${ADMIN.password}`).toString("base64")}`;
  await committed({ ...s, api: (path, init = {}) => s.api(path, { ...init, headers: { authorization: basic } }) }, "rec", 2);
}, 90_000);

afterAll(async () => {
  for (const b of browsers) await b.close();
  await s?.stop();
});

type Page = WatchedPage["page"];

async function visit(page: Page, hash: string): Promise<void> {
  await page.goto("about:blank");
  await page.goto(`${s.apiUrl}/#/${hash}`);
  await page.locator("main h1").first().waitFor();
}

/** The visible buttons of the page's main part that change something. */
async function writeButtons(page: Page): Promise<string[]> {
  const names = await page.locator("main button:visible").evaluateAll((els) => els.map((e) => (e.textContent ?? "").trim()));
  return names.filter((n) => WRITE.test(n));
}

/** Opens every card section of the Plugins page (cache entries, rules, jobs, downloads) and waits for their data. */
async function pluginsOpened(page: Page): Promise<void> {
  await visit(page, "plugins");
  await page.getByTestId("matcher-blocked-status").waitFor();
  await page.getByTestId("provider-ads-rules").getByText("1").waitFor();
  await page.getByTestId("cache-answers").locator("summary").click();
  await page.getByTestId("cache-answers").locator("tr[data-domain='www.example.net']").waitFor();
  await page.getByTestId("rules-of-dyn").locator("summary").click();
  await page.getByTestId("set-status").waitFor();
  await page.getByTestId("jobs-nightly").locator("summary").click();
  await page.getByTestId("cron-nightly").locator("li[data-job=report]").waitFor();
  await page.getByTestId("downloads-of-fetch").locator("summary").click();
  await page.getByTestId("downloads-fetch").locator("tr[data-index='0']").waitFor();
}

async function recordOpened(page: Page): Promise<void> {
  await visit(page, "queries?qname=www.example.net");
  await page.getByTestId("record-open").first().click();
  await page.getByTestId("record-detail").waitFor();
}

const nav = (page: Page): Promise<string[]> => page.locator("nav[aria-label=Pages] a").allTextContents();

describe("what each role sees", { timeout: 90_000 }, () => {
  test("a viewer sees no write control on any page, and the header names them with their role", async () => {
    const { page } = tabs.vera;
    expect(await page.getByTestId("who").textContent()).toBe("vera viewerSign out");
    expect(await nav(page)).toEqual(["Overview", "Query log", "Clients", "Logs", "Plugins", "System", "Cron & downloads"]);

    await pluginsOpened(page);
    expect(await writeButtons(page)).toEqual([]);
    // The state still shows: the matcher's mode, the provider's rule count.
    expect(await page.getByTestId("matcher-blocked-status").textContent()).toContain("normal");

    await visit(page, "clients");
    await page.getByTestId("group-kids-state").waitFor();
    await page.locator("[data-testid=seen-clients] tr[data-address='127.0.0.1']").waitFor();
    expect(await writeButtons(page)).toEqual([]);

    await visit(page, "system");
    await page.getByTestId("build-version").waitFor();
    expect(await page.getByTestId("upgrade").count()).toBe(0);
    expect(await writeButtons(page)).toEqual([]);

    await recordOpened(page);
    expect(await page.getByTestId("set-actions").count()).toBe(0);

    await visit(page, "jobs");
    await page.getByTestId("cron-nightly").locator("li[data-job=report]").waitFor();
    expect(await writeButtons(page)).toEqual([]);

    // The read-only pages read as before (no refusal among their requests: problems() below).
    await visit(page, "overview");
    await page.locator("[data-testid=overview-total][data-count='2']").waitFor();
    await visit(page, "logs");
    await page.getByTestId("stream-state").getByText("live").waitFor();

    // Configuration and Audit are an admin's: opened by address, they say so.
    for (const hash of ["config", "audit", "access"]) {
      await visit(page, hash);
      await page.getByTestId("not-for-role").getByText("This page is for the admin role; you are signed in as vera (viewer).").waitFor();
      expect(await page.getByTestId("config-text").count()).toBe(0);
      expect(await writeButtons(page)).toEqual([]);
    }
    expect(tabs.vera.problems()).toEqual([]);
  });

  test("a write forced from a viewer's page is refused 403 forbidden_role, naming the role needed", async () => {
    const { page } = tabs.vera;
    const forced = await page.evaluate(async () => {
      const post = async (path: string, body?: unknown): Promise<{ status: number; body: unknown }> => {
        const res = await fetch(path, { method: "POST", headers: { "x-requested-with": "XMLHttpRequest", ...(body === undefined ? {} : { "content-type": "application/json" }) }, body: body === undefined ? undefined : JSON.stringify(body) });
        return { status: res.status, body: await res.json() };
      };
      return [await post("api/reload"), await post("api/plugins/blocked/mode", { mode: "always_false" })];
    });
    expect(forced[0]).toMatchObject({ status: 403, body: { ok: false, code: "forbidden_role", role_needed: "admin", role: "viewer" } });
    expect(forced[1]).toMatchObject({ status: 403, body: { ok: false, code: "forbidden_role", role_needed: "operator", role: "viewer" } });
    // Nothing changed.
    const status = await page.evaluate(async () => (await (await fetch("api/plugins/blocked/status")).json()) as { mode: string });
    expect(status.mode).toBe("normal");
    expect(tabs.vera.problems([{ status: 403, path: "/api/reload" }, { status: 403, path: "/api/plugins/blocked/mode" }])).toEqual([]);
  });

  test("an operator has the runtime controls, but not the configuration, Audit or Upgrade", async () => {
    const { page } = tabs.otto;
    expect(await nav(page)).toEqual(["Overview", "Query log", "Clients", "Logs", "Plugins", "System", "Cron & downloads"]);
    await pluginsOpened(page);
    const shown = await writeButtons(page);
    for (const name of ["Normal", "Always true", "Always false", "Pause", "Reload rules", "Flush…", "Delete", "Clear all…", "Add", "Run now", "Run all", "Run"]) expect(shown, name).toContain(name);

    await visit(page, "clients");
    await page.locator("[data-testid=seen-clients] tr[data-address='127.0.0.1']").waitFor();
    expect(await writeButtons(page)).toEqual(expect.arrayContaining(["15 min", "1 h", "Until…", "Name…"]));

    await recordOpened(page);
    await page.getByTestId("set-actions").waitFor();

    await visit(page, "system");
    await page.getByTestId("build-version").waitFor();
    expect(await page.getByTestId("upgrade").count()).toBe(0);
    await visit(page, "config");
    await page.getByTestId("not-for-role").waitFor();
    expect(await writeButtons(page)).toEqual([]);
    expect(tabs.otto.problems()).toEqual([]);
  });

  test("an admin has every page and control: Configuration's Save and Reload, the Upgrade card, Audit and Access", async () => {
    const { page } = tabs.ada;
    expect(await nav(page)).toEqual(["Overview", "Query log", "Clients", "Logs", "Plugins", "Configuration", "System", "Cron & downloads", "Audit", "Access"]);
    await visit(page, "config");
    await page.getByTestId("config-version").waitFor();
    expect(await writeButtons(page)).toEqual(expect.arrayContaining(["Validate", "Save", "Reload now"]));
    await visit(page, "system");
    await page.getByTestId("upgrade").getByRole("button", { name: "Check for updates" }).waitFor();
    expect(tabs.ada.problems()).toEqual([]);
  });
});

describe("the audit trail names who did it", { timeout: 90_000 }, () => {
  test("the operator pauses a matcher on the Plugins page; the admin's Audit page shows the row naming the operator and always_false, and the next change arrives live", async () => {
    const operator = tabs.otto.page;
    await visit(operator, "plugins");
    const control = operator.getByTestId("matcher-blocked");
    await control.getByLabel("Minutes to pause blocked").fill("10");
    await control.getByRole("button", { name: "Pause" }).click();
    await operator.getByTestId("matcher-blocked-status").getByText("always_false").waitFor();

    const admin = tabs.ada.page;
    await visit(admin, "audit");
    await admin.getByTestId("audit-live").getByText("live").waitFor();
    const row = admin.getByTestId("audit-table").locator("tr[data-actor=otto]", { hasText: "always_false" });
    await row.waitFor();
    const cells = await row.locator("td").allTextContents();
    expect(cells[1]).toContain("otto");
    expect(cells[1]).toContain("via session");
    expect(cells[2]).toBe("127.0.0.1");
    expect(cells[3]).toContain("POST");
    expect(cells[3]).toContain("blocked");
    expect(cells[4]).toContain("200");
    expect(cells[5]).toContain("always_false");
    // The viewer's refused write is there too, with its code.
    const refused = admin.getByTestId("audit-table").locator("tr[data-actor=vera][data-status='403']").first();
    expect(await refused.textContent()).toContain("forbidden_role");

    // Live: back to normal from the operator's page, and the row arrives on top without a reload.
    await operator.getByTestId("matcher-blocked").getByRole("button", { name: "Normal" }).click();
    await operator.getByTestId("matcher-blocked-status").getByText("normal").waitFor();
    const top = admin.getByTestId("audit-table").locator("tbody tr").first();
    await expect.poll(() => top.textContent()).toMatch(/otto.*normal/s);
    expect(tabs.otto.problems()).toEqual([]);
    expect(tabs.ada.problems()).toEqual([]);
  });
});
