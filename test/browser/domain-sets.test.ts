// Dynamic domain sets in the dashboard, in a real browser (Chromium via playwright-core) against a real
// Sluice (its single api.http.auth user signed in through the form) whose pipeline reads two
// dynamic_domain_sets, `allow` (accepted before) and `block` (NXDOMAIN), behind a query recorder fed
// with real DNS queries: the Query log's "Block" and "Allow" add a record's name to the set the
// operator picks (remembered for the tab, forgotten at sign-out) and the next DNS query follows; the
// API's refusals are shown; the Plugins page's rules editor lists (paged, filtered, each rule's source
// and time left), adds (bad rules named at their lines), removes and clears, follows changes made
// elsewhere and rules that expire (the server's clock is moved, not waited for); both pages fit
// 1280×800 and 390×844 with no console error.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { query, rcodeOf } from "../helpers/dns.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";
import { committed } from "../integration/recorder-helpers.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type ExpectedHttpError, type TestBrowser, type WatchedPage } from "./browser.js";

const USER = "ops";
const PASSWORD = "dyn-sets";
const AUTH = { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString("base64")}` };

const CONFIG = `
api:
  http:
    listen: 127.0.0.1:0
    auth: { username: ${USER}, password: "${PASSWORD}" }
plugins:
  - { tag: block, type: dynamic_domain_set, args: { path: block.txt, cleanup_interval_seconds: 0.05 } }
  - { tag: allow, type: dynamic_domain_set, args: { path: allow.txt, max_entries: 3 } }
  - { tag: rec, type: query_recorder, args: { path: rec.db, flush_interval_ms: 20 } }
  - tag: main
    type: sequence
    args:
      - exec: $rec
      - exec: black_hole 10.0.0.1
      - { matches: "qname $allow", exec: accept }
      - { matches: "qname $block", exec: reject 3 }
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

const NAMES = ["ads.example", "good.ads.example", "www.example.net", "a,b.example"];
/** The sign-in probe of each new tab answers 401 (expected). */
const SIGN_IN: ExpectedHttpError = { status: 401, path: "/api/session" };

let s: RunningSluice;
let authed: RunningSluice;
const shift = { ms: 0 };
let browser: TestBrowser;

beforeAll(async () => {
  s = await startSluice(CONFIG, {}, { clockShift: shift });
  authed = { ...s, api: (path, init = {}) => s.api(path, { ...init, headers: { ...AUTH, ...Object.fromEntries(new Headers(init.headers)) } }) };
  for (const name of NAMES) await query(s.udpPort, name);
  await committed(authed, "rec", NAMES.length);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.stop();
});

type Page = WatchedPage["page"];

/** The rcode of an A query for `name` (0 NOERROR, 3 NXDOMAIN). */
const rcode = async (name: string): Promise<number> => rcodeOf(await query(s.udpPort, name));

async function api<T>(path: string, body?: unknown, method = "POST"): Promise<T> {
  const res = await authed.api(path, body === undefined ? {} : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status, path).toBe(200);
  return (await res.json()) as T;
}

const ruleList = async (tag: string): Promise<{ rule: string; source: string; ttl_left_ms: number | null }[]> =>
  (await api<{ rules: { rule: string; source: string; ttl_left_ms: number | null }[] }>(`/api/plugins/${tag}/rules?limit=500`)).rules;

/** Signs in with the form shown, and waits until the dashboard is in (before the tab moves on). */
async function signIn(page: Page): Promise<void> {
  const form = page.getByTestId("sign-in");
  await form.getByLabel("User name").fill(USER);
  await form.getByLabel("Password").fill(PASSWORD);
  await form.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
}

/** A fresh tab at `hash`, signed in (the browser's session cookie may have signed it in already). */
async function openSignedIn(hash: string, viewport: { width: number; height: number } = DESKTOP): Promise<WatchedPage> {
  const w = await browser.open(viewport);
  await w.page.goto(`${s.apiUrl}/#/${hash}`);
  await w.page.locator("[data-testid=sign-in], [data-testid=who]").first().waitFor();
  if ((await w.page.getByTestId("sign-in").count()) > 0) await signIn(w.page);
  return w;
}

/** A fresh load of a page in the same tab (the tab's session stays). */
async function visit(page: Page, hash: string): Promise<void> {
  await page.goto("about:blank");
  await page.goto(`${s.apiUrl}/#/${hash}`);
  await page.locator("main h1").first().waitFor();
}

/** Opens the detail of the newest record of `qname` in the Query log. */
async function openRecord(page: Page, qname: string) {
  await visit(page, `queries?qname=${encodeURIComponent(qname)}`);
  const row = page.locator(`[data-testid=records-table] tr[data-qname="${qname}."]`).first();
  try {
    await row.getByTestId("record-open").click();
  } catch (err) {
    throw new Error(`no record of ${qname} in the Query log, which shows: ${(await page.locator("main").innerText()).slice(0, 600)}`, { cause: err });
  }
  const actions = page.getByTestId("record-detail").getByTestId("set-actions");
  await actions.waitFor();
  return actions;
}

const result = (page: Page) => page.getByTestId("set-result");

describe("query log: Block and Allow", { timeout: 60_000 }, () => {
  let w: WatchedPage;
  beforeAll(async () => {
    w = await openSignedIn("queries");
  });
  afterAll(async () => {
    await w.page.close();
  });

  test("add the record's name to the set each action is bound to; the next query follows", async () => {
    expect(await rcode("ads.example")).toBe(0);
    const actions = await openRecord(w.page, "ads.example");
    // The sets are preselected by their tags; the operator can pick another (below).
    expect(await actions.getByTestId("set-for-block").inputValue()).toBe("block");
    expect(await actions.getByTestId("set-for-allow").inputValue()).toBe("allow");
    expect(await actions.getByTestId("set-for-block").locator("option").allTextContents()).toEqual(["allow", "block"]);

    await actions.getByTestId("set-block").click();
    await expect.poll(() => result(w.page).textContent()).toBe("Block: added full:ads.example to block (until removed; 1 rule now).");
    expect(await rcode("ads.example")).toBe(3);
    // full: is that name only.
    expect(await rcode("sub.ads.example")).toBe(0);

    await actions.getByTestId("set-block").click();
    await expect.poll(() => result(w.page).textContent()).toBe("Block: full:ads.example was already in block; it now lasts until removed.");

    // With its subdomains, for an hour.
    await actions.getByTestId("set-kind").selectOption("domain");
    await actions.getByTestId("set-ttl").selectOption("1h");
    await actions.getByTestId("set-block").click();
    await expect.poll(() => result(w.page).textContent()).toBe("Block: added domain:ads.example to block (1 hour; 2 rules now).");
    expect(await rcode("good.ads.example")).toBe(3);
    const rules = await ruleList("block");
    expect(rules.map((r) => [r.rule, r.source, r.ttl_left_ms === null])).toEqual([
      ["full:ads.example", "api", true],
      ["domain:ads.example", "api", false],
    ]);
    expect(rules[1]?.ttl_left_ms).toBeGreaterThan(3_590_000);

    // Allow wins over Block in this pipeline (accepted before the block rule).
    const other = await openRecord(w.page, "good.ads.example");
    await other.getByTestId("set-allow").click();
    await expect.poll(() => result(w.page).textContent()).toBe("Allow: added full:good.ads.example to allow (until removed; 1 rule now).");
    expect(await rcode("good.ads.example")).toBe(0);
    expect(await rcode("ads.example")).toBe(3);
    await w.screenshot("domain-sets-query-log");
    expect(w.problems([SIGN_IN])).toEqual([]);
  });

  test("the operator's pick is kept for the tab and forgotten at sign-out", async () => {
    let actions = await openRecord(w.page, "www.example.net");
    await actions.getByTestId("set-for-allow").selectOption("block");
    await visit(w.page, "overview");
    actions = await openRecord(w.page, "www.example.net");
    expect(await actions.getByTestId("set-for-allow").inputValue()).toBe("block");
    expect(await w.page.evaluate(() => sessionStorage.getItem("sluice.domainSetChoice"))).toBe('{"allow":"block"}');

    await w.page.getByRole("button", { name: "Sign out" }).click();
    const form = w.page.getByTestId("sign-in");
    await form.getByText("Signed out.").waitFor();
    expect(await w.page.evaluate(() => sessionStorage.getItem("sluice.domainSetChoice"))).toBeNull();
    await signIn(w.page);
    actions = await openRecord(w.page, "www.example.net");
    expect(await actions.getByTestId("set-for-allow").inputValue()).toBe("allow");
    expect(w.problems([SIGN_IN])).toEqual([]);
  });

  test("the API's refusals are shown: a name that is not a rule, a full set", async () => {
    let actions = await openRecord(w.page, "a,b.example");
    await actions.getByTestId("set-block").click();
    await expect.poll(() => result(w.page).textContent()).toMatch(/^Could not add full:a,b\.example to block\. Refused \(400 invalid_rules\): the rule is invalid; nothing was changed: rules\[0\]: rule 'a,b\.example' contains a comma/);
    expect((await ruleList("block")).length).toBe(2);

    // allow holds at most 3 rules: 1 from before and 2 more fill it.
    await api("/api/plugins/allow/rules", { rules: ["one.example", "two.example"] });
    actions = await openRecord(w.page, "www.example.net");
    await actions.getByTestId("set-allow").click();
    await expect.poll(() => result(w.page).textContent()).toMatch(/^Could not add full:www\.example\.net to allow\. Refused \(507 dynamic_set_full\): /);
    expect(await rcode("www.example.net")).toBe(0);
    await api("/api/plugins/allow/rules", { rules: ["one.example", "two.example"] }, "DELETE");
    expect(
      w.problems([SIGN_IN, { status: 400, path: "/api/plugins/block/rules" }, { status: 507, path: "/api/plugins/allow/rules" }]),
    ).toEqual([]);
  });
});

describe("plugins page: the rules editor", { timeout: 60_000 }, () => {
  let w: WatchedPage;
  beforeAll(async () => {
    w = await openSignedIn("plugins");
  });
  afterAll(async () => {
    await w.page.close();
  });

  const editor = () => w.page.getByTestId("set-rules-block");
  const shown = () => editor().locator("tbody tr").evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-rule")));
  const message = () => w.page.getByTestId("set-message-block");

  test("lists the rules with source and time left; adds, names bad rules at their lines, filters and removes; DNS follows", async () => {
    await w.page.getByTestId("plugin-allow").waitFor();
    await w.page.getByTestId("rules-of-block").locator("summary").click();
    await expect.poll(shown).toEqual(["full:ads.example", "domain:ads.example"]);
    // (Once the file is written, "changes not written yet" goes: the write changes the set's actor.)
    await expect.poll(() => editor().getByTestId("set-status").textContent()).toBe("2 of at most 100,000 rules (2 api) · file block.txt");
    const expires = await editor().getByTestId("rule-expires").allTextContents();
    expect(expires[0]).toBe("never");
    expect(expires[1]).toMatch(/^in (5\d min \d+ s|1 h 0 min)$/);

    const text = editor().getByTestId("add-rules-block");
    await text.fill("tracker.example\n# a comment\n\nfull:exact.example");
    await editor().getByRole("button", { name: "Add", exact: true }).click();
    await expect.poll(() => message().textContent()).toBe("Added 2 rules; 4 rules now.");
    await expect.poll(shown).toEqual(["full:ads.example", "domain:ads.example", "domain:tracker.example", "full:exact.example"]);
    expect(await text.inputValue()).toBe("");
    expect(await rcode("cdn.tracker.example")).toBe(3);
    expect(await rcode("exact.example")).toBe(3);
    expect(await rcode("sub.exact.example")).toBe(0);

    // Bad rules are named at their lines; nothing is added; the text stays for fixing.
    await text.fill("fine.example\ntwo words\n\nkeyword:");
    await editor().getByRole("button", { name: "Add", exact: true }).click();
    const problems = editor().getByTestId("add-problems-block");
    await problems.waitFor();
    expect(await problems.locator("li").evaluateAll((lis) => lis.map((li) => li.getAttribute("data-line")))).toEqual(["2", "4"]);
    expect(await problems.textContent()).toContain("Nothing was added: 2 rules are not valid.line 2 (two words): rule 'two words' contains a space");
    expect(await text.inputValue()).toBe("fine.example\ntwo words\n\nkeyword:");
    expect(await rcode("fine.example")).toBe(0);
    // A bad lifetime is named too.
    await text.fill("fine.example");
    await editor().getByTestId("add-ttl-block").fill("soon");
    await editor().getByRole("button", { name: "Add", exact: true }).click();
    await expect.poll(() => problems.locator("li").getAttribute("data-line")).toBe("ttl");
    expect(await problems.locator("li").textContent()).toMatch(/^Expires after: ttl: /);
    await text.fill("");
    await editor().getByTestId("add-ttl-block").fill("");
    expect((await ruleList("block")).length).toBe(4);

    await editor().getByLabel("Search the rules of block").fill("TRACKER");
    await editor().getByRole("button", { name: "Search" }).click();
    await expect.poll(shown).toEqual(["domain:tracker.example"]);
    expect(await editor().getByTestId("set-range-block").textContent()).toBe("1–1 of 1 containing “TRACKER”");
    await editor().getByRole("button", { name: "Remove domain:tracker.example" }).click();
    await expect.poll(() => message().textContent()).toBe("Removed domain:tracker.example.");
    await editor().getByText("No rule contains “TRACKER”.").waitFor();
    expect(await rcode("cdn.tracker.example")).toBe(0);
    await editor().getByLabel("Search the rules of block").fill("");
    await editor().getByRole("button", { name: "Search" }).click();
    await expect.poll(shown).toEqual(["full:ads.example", "domain:ads.example", "full:exact.example"]);
    await w.screenshot("domain-sets-editor");
    expect(w.problems([SIGN_IN, { status: 400, path: "/api/plugins/block/rules" }])).toEqual([]);
  });

  test("follows changes made elsewhere, pages with the cursor, drops expired rules, and clears", async () => {
    // 60 rules added by curl show up by themselves (the set's actor changed).
    await api("/api/plugins/block/rules", { rules: Array.from({ length: 60 }, (_, i) => `page${i}.example`) });
    await expect.poll(() => editor().getByTestId("set-range-block").textContent()).toBe("1–50 of 63");
    await editor().getByRole("button", { name: "Next →" }).click();
    await expect.poll(() => editor().getByTestId("set-range-block").textContent()).toBe("51–63 of 63");
    expect((await shown()).slice(-1)).toEqual(["domain:page59.example"]);
    await editor().getByRole("button", { name: "← Previous" }).click();
    await expect.poll(() => editor().getByTestId("set-range-block").textContent()).toBe("1–50 of 63");

    // Two hours later on the server's clock, domain:ads.example (1 h) has expired; the sweep removes it
    // and the page reads again.
    shift.ms += 2 * 3_600_000;
    await expect.poll(async () => (await shown()).slice(0, 3)).toEqual(["full:ads.example", "full:exact.example", "domain:page0.example"]);
    expect(await editor().getByTestId("set-status").textContent()).toContain("62 of at most 100,000 rules (62 api) · file block.txt");
    expect(await editor().getByTestId("set-status").textContent()).toContain("1 expired since loaded");
    expect(await rcode("good.ads.example")).toBe(0);
    expect(await rcode("other.ads.example")).toBe(0);
    expect(await rcode("ads.example")).toBe(3);

    await editor().getByRole("button", { name: "Clear all…" }).click();
    await editor().getByRole("button", { name: "Yes, remove all 62 rules" }).click();
    await expect.poll(() => message().textContent()).toBe("Cleared: 62 rules removed.");
    await editor().getByText("The set has no rules.").waitFor();
    expect(await rcode("ads.example")).toBe(0);
    expect(await ruleList("block")).toEqual([]);
    expect(w.problems([SIGN_IN])).toEqual([]);
  });
});

describe("layout", { timeout: 90_000 }, () => {
  test("the Query log's actions and the rules editor fit 1280×800 and 390×844, with a visible focus and no console error", async () => {
    await api("/api/plugins/block/rules", { rules: ["full:a-rather-long-name-of-a-tracking-host.cdn-of-some-advertiser.example", "keyword:beacon"], ttl: "7d" });
    for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      const view = await openSignedIn("queries", viewport);
      await openRecord(view.page, "ads.example");
      expect(await overflow(view.page), `query log at ${name}`).toEqual([]);
      await view.page.getByTestId("set-actions").scrollIntoViewIfNeeded();
      await view.screenshot(`domain-sets-actions-${name}`);

      await visit(view.page, "plugins");
      await view.page.getByTestId("rules-of-block").locator("summary").click();
      await view.page.getByTestId("set-rules-block").locator("tr[data-rule='keyword:beacon']").waitFor();
      expect(await overflow(view.page), `plugins at ${name}`).toEqual([]);
      await view.page.getByTestId("add-rules-block").focus();
      const stops = await tabThrough(view.page, 4);
      expect(stops.filter((f) => !f.visible), `rules editor at ${name}`).toEqual([]);
      await view.page.getByTestId("set-rules-block").scrollIntoViewIfNeeded();
      await view.screenshot(`domain-sets-editor-${name}`);
      expect(view.problems([SIGN_IN]), name).toEqual([]);
      await view.page.close();
    }
  });
});
