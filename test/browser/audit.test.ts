// The Audit page in a real browser against a real Sluice whose audit trail holds real requests of
// three users (made over HTTP with their Basic credentials before the page opens): newest first, 100
// a page, "Older" appending the rest by the cursor; the filters (who, method, tag, status, text, time
// range) narrow the rows as the route does, and entries arriving on the stream while the page follows
// it are put on top only when they pass the filters in force; usable at 390×844; and the Access page
// makes a token whose secret is shown once and works, then revokes it.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { ADMIN, OPERATOR, signInAs, usersYaml, VIEWER, type TestUser } from "./accounts.js";
import { launchBrowser, overflow, PHONE, type ExpectedHttpError, type TestBrowser, type WatchedPage } from "./browser.js";


const config = (users: string): string => `
api:
  http:
    listen: 127.0.0.1:0
    auth:
${users}
plugins:
  - { tag: ads, type: domain_set, args: { exps: ["domain:ads.example"] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - tag: main
    type: sequence
    args:
      - { matches: $blocked, exec: "black_hole 0.0.0.0 short_circuit" }
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

const PROBE: ExpectedHttpError = { status: 401, path: "/api/session" };
/** Matcher mode changes of the operator before the page opens: more than one page of 100. */
const CHANGES = 110;

let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;

const basic = (u: TestUser): string => `Basic ${Buffer.from(`${u.name}:${u.password}`).toString("base64")}`;

async function as(u: TestUser, method: string, path: string, body?: unknown): Promise<number> {
  const headers: Record<string, string> = { authorization: basic(u) };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await s.api(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  await res.arrayBuffer();
  return res.status;
}

const setMode = (mode: string): Promise<number> => as(OPERATOR, "POST", "/api/plugins/blocked/mode", { mode });

beforeAll(async () => {
  s = await startSluice(config(await usersYaml([VIEWER, OPERATOR, ADMIN])));
  for (let i = 0; i < CHANGES / 2; i++) {
    expect(await setMode("always_false")).toBe(200);
    // The viewer's refused writes, among the operator's changes.
    if (i === 20) for (let j = 0; j < 3; j++) expect(await as(VIEWER, "POST", "/api/reload")).toBe(403);
    expect(await setMode("normal")).toBe(200);
  }
  browser = await launchBrowser();
  w = await browser.open();
  await w.page.goto(`${s.apiUrl}/#/audit`);
  await signInAs(w, ADMIN);
  expect(w.problems([PROBE])).toEqual([]);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

type Page = WatchedPage["page"];

const rows = (page: Page) => page.getByTestId("audit-table").locator("tbody tr");
const ids = async (page: Page): Promise<number[]> => (await rows(page).evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute("data-id")))));
const column = (page: Page, n: number): Promise<string[]> => rows(page).evaluateAll((trs, i) => trs.map((tr) => tr.querySelectorAll("td")[i]?.textContent ?? ""), n);

async function applyFilters(page: Page, fill: (form: ReturnType<Page["getByRole"]>) => Promise<void>): Promise<void> {
  const form = page.getByRole("form", { name: "Filter the audit trail" });
  await form.getByRole("button", { name: "Clear" }).click();
  await fill(form);
  await form.getByRole("button", { name: "Apply" }).click();
}

describe("the Audit page", { timeout: 90_000 }, () => {
  test("lists the trail newest first, 100 a page; Older appends the rest down to the oldest", async () => {
    await rows(w.page).nth(99).waitFor();
    const first = await ids(w.page);
    expect(first.length).toBe(100);
    expect([...first].sort((a, b) => b - a)).toEqual(first);
    // The newest: the admin signing in on this page (its first "who am I?" without a cookie is not in the trail).
    const top = await rows(w.page).first().locator("td").allTextContents();
    expect(top.slice(1)).toEqual(["ada via session · admin", "127.0.0.1", "POST /api/session", "200", "sign in as ada"]);
    // Before it, the operator's last change back to normal.
    const change = await rows(w.page).nth(1).locator("td").allTextContents();
    expect(change[1]).toBe("otto via basic · operator");
    expect(change[3]).toMatch(/^POST \/api\/plugins\/\{tag\}\/mode · blocked$/);
    expect(change[4]).toBe("200");
    expect(change[5]).toContain("normal");

    await w.page.getByTestId("audit-older").click();
    await expect.poll(async () => (await ids(w.page)).length).toBe(CHANGES + 3 + 1);
    const all = await ids(w.page);
    expect(new Set(all).size).toBe(all.length);
    expect([...all].sort((a, b) => b - a)).toEqual(all);
    expect(await w.page.getByTestId("audit-older").count()).toBe(0);
    expect(await w.page.getByTestId("audit-count").textContent()).toMatch(/entries \(to the oldest kept\)$/);
    expect(w.problems()).toEqual([]);
  });

  test("the filters narrow the rows as the route does: who, status class, method and tag, text, time range", async () => {
    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-actor").fill("vera");
    });
    await expect.poll(() => ids(w.page).then((x) => x.length)).toBe(3);
    for (const who of await column(w.page, 1)) expect(who).toMatch(/^vera via basic/);
    for (const status of await column(w.page, 4)) expect(status).toBe("403 forbidden_role");

    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-status").fill("4xx");
    });
    // The viewer's three refused writes (the page's own first probe, without a cookie, is not written).
    await expect.poll(() => column(w.page, 4)).toEqual(["403 forbidden_role", "403 forbidden_role", "403 forbidden_role"]);

    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-method").selectOption("POST");
      await f.getByTestId("audit-tag").fill("blocked");
      await f.getByTestId("audit-q").fill("always_false");
    });
    await expect.poll(() => ids(w.page).then((x) => x.length)).toBe(CHANGES / 2);
    for (const summary of await column(w.page, 5)) expect(summary).toContain("always_false");

    // A range that ends before anything was recorded: nothing.
    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-to").fill("2001-01-01T00:00");
    });
    await w.page.getByTestId("audit-empty").getByText("No entries match the filters.").waitFor();
    // A status that is neither a code nor a class is named before anything is asked.
    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-status").fill("40");
    });
    await w.page.getByText("Status is a code such as 403, or a class such as 4xx.").waitFor();
    expect(w.problems()).toEqual([]);
  });

  test("following the stream, a new entry goes on top when it passes the filters, and only then", async () => {
    await applyFilters(w.page, async (f) => {
      await f.getByTestId("audit-actor").fill("vera");
    });
    await expect.poll(() => ids(w.page).then((x) => x.length)).toBe(3);
    await w.page.getByTestId("audit-live").getByText("live").waitFor();
    // The operator's change does not pass "who: vera"; the viewer's refused write does.
    expect(await setMode("always_true")).toBe(200);
    expect(await as(VIEWER, "POST", "/api/plugins/blocked/mode", { mode: "always_false" })).toBe(403);
    await expect.poll(() => ids(w.page).then((x) => x.length)).toBe(4);
    for (const who of await column(w.page, 1)) expect(who).toMatch(/^vera/);
    expect((await column(w.page, 3))[0]).toMatch(/POST .*mode/);
    // The operator's change was streamed too (the viewer's came after it): it was left out, not missed.
    expect(w.problems()).toEqual([]);
  });

  test("is usable on a phone (390×844): the rows become labelled blocks, nothing sticks out", async () => {
    const phone = await browser.open(PHONE);
    await phone.page.goto(`${s.apiUrl}/#/audit`);
    await rows(phone.page).first().waitFor();
    expect(await overflow(phone.page)).toEqual([]);
    await phone.screenshot("audit-phone");
    expect(phone.problems()).toEqual([]);
    await phone.page.close();
  });
});

describe("the Access page", { timeout: 90_000 }, () => {
  test("makes a token whose secret is shown once and works, lists it without the secret, and revokes it", async () => {
    const { page } = w;
    await page.goto("about:blank");
    await page.goto(`${s.apiUrl}/#/access`);
    const form = page.getByTestId("token-form");
    await form.getByTestId("token-name").fill("prometheus");
    await form.getByTestId("token-role").selectOption("metrics");
    await form.getByTestId("token-lifetime").selectOption("7d");
    await form.getByTestId("token-create").click();
    const secret = await page.getByTestId("token-secret-value").inputValue();
    expect(secret).toMatch(/^slc_/);
    const row = page.getByTestId("tokens").locator("tr[data-token=prometheus]");
    await row.waitFor();
    expect(await row.textContent()).not.toContain(secret);
    expect(await row.textContent()).toContain("metrics");

    const bearer = { authorization: `Bearer ${secret}` };
    expect((await s.api("/api/metrics", { headers: bearer })).status).toBe(200);
    expect((await s.api("/api/config", { headers: bearer })).status).toBe(403);

    // Leaving the page drops the secret: it is not shown again.
    await page.goto(`${s.apiUrl}/#/system`);
    await page.goto(`${s.apiUrl}/#/access`);
    await row.waitFor();
    expect(await page.getByTestId("token-secret").count()).toBe(0);

    await row.getByRole("button", { name: "Revoke prometheus" }).click();
    await row.getByRole("button", { name: "Yes, revoke prometheus" }).click();
    await page.getByTestId("token-message").getByText("Revoked prometheus: it is refused from its next request on.").waitFor();
    expect(await row.count()).toBe(0);
    expect((await s.api("/api/metrics", { headers: bearer })).status).toBe(401);
    expect(w.problems()).toEqual([]);
  });
});
