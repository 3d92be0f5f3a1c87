// The dashboard in a real browser (Chromium via playwright-core) against a real Sluice answering
// real DNS queries the test sends: every page renders and fits at 1280×800 and 390×844 with a
// visible keyboard focus and no console error; a matcher switch in the UI changes a DNS answer;
// provider reload shows rule counts; the cache browser searches, deletes, flushes and downloads.
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { answerIps, query } from "../helpers/dns.js";
import { DESKTOP, launchBrowser, overflow, PHONE, tabThrough, type TestBrowser, type WatchedPage } from "./browser.js";
import { startSluice, type RunningSluice } from "../helpers/sluice.js";

const CONFIG = `
api:
  http: 127.0.0.1:0
plugins:
  - { tag: ads, type: domain_set, args: { files: [ads.txt] } }
  - { tag: blocked, type: qname, args: ["$ads"] }
  - { tag: answers, type: cache, args: { size: 1000 } }
  - tag: main
    type: sequence
    args:
      - { matches: $blocked, exec: "black_hole 0.0.0.0 short_circuit" }
      - exec: $answers
      - exec: black_hole 10.0.0.1
  - { tag: udp, type: udp_server, args: { entry: main, listen: "127.0.0.1:0" } }
`;

let s: RunningSluice;
let browser: TestBrowser;
let w: WatchedPage;

beforeAll(async () => {
  s = await startSluice(CONFIG, { "ads.txt": "ads.example\ntracker.example\n" });
  browser = await launchBrowser();
  w = await browser.open();
}, 60_000);

afterAll(async () => {
  // The browser goes first: a page left open would log the refused reconnects of its log stream.
  await browser?.close();
  await s?.stop();
});

const firstIp = async (name: string): Promise<string | undefined> => answerIps(await query(s.udpPort, name))[0];

/** A fresh load of a page (a hash change alone would keep the previous page's focus and state). */
async function visit(page: WatchedPage["page"], id: string): Promise<void> {
  await page.goto("about:blank");
  await page.goto(`${s.apiUrl}/#/${id}`);
  await page.locator("main h1").first().waitFor();
}

/** Waits for what shows that each page has its data. */
const READY: Record<string, (page: WatchedPage["page"]) => Promise<void>> = {
  system: async (p) => {
    await p.getByTestId("health-status").getByText("healthy").waitFor();
    await p.getByTestId("build-version").waitFor();
  },
  plugins: async (p) => {
    await p.getByTestId("matcher-blocked-status").waitFor();
    await p.getByTestId("provider-ads-rules").getByText("2").waitFor();
  },
  logs: async (p) => {
    await p.getByTestId("stream-state").getByText("live").waitFor();
    await p.getByTestId("log-list").locator("li").first().waitFor();
  },
  config: async (p) => {
    await p.getByTestId("config-version").waitFor();
    expect(await p.getByTestId("config-text").inputValue()).toContain("tag: blocked");
  },
  audit: async (p) => {
    await p.getByTestId("audit-live").getByText("live").waitFor();
    await p.getByTestId("audit-count").getByText(/to the oldest kept/).waitFor();
  },
};

describe("every page", { timeout: 60_000 }, () => {
  test("renders its data and fits at 1280×800 and at 390×844 (phone), with no console error", async () => {
    for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      const view = await browser.open(viewport);
      for (const id of Object.keys(READY)) {
        await visit(view.page, id);
        await READY[id](view.page);
        expect(await overflow(view.page), `${id} at ${name}`).toEqual([]);
        await view.screenshot(`${id}-${name}`);
        // Every control reached by Tab shows where the focus is.
        // (A page with fewer stops lets the focus leave the document: "body".)
        expect((await tabThrough(view.page, 10)).filter((f) => !f.visible && f.element !== "body"), `${id} at ${name}`).toEqual([]);
      }
      // The navigation offers the pages this server backs: no recorder, cron or download plugin here.
      expect(await view.page.locator("nav[aria-label=Pages] a").allTextContents()).toEqual(["Logs", "Plugins", "Configuration", "System", "Audit"]);
      expect(view.problems(), name).toEqual([]);
      await view.page.close();
    }
  }, 90_000);

  test("keyboard focus is visible on every stop, and the skip link leads to the content", async () => {
    await visit(w.page, "plugins");
    await READY.plugins(w.page);
    const stops = await tabThrough(w.page, 14);
    expect(stops.filter((f) => !f.visible)).toEqual([]);
    // The stops cover the navigation and the page's own controls.
    expect(stops.map((f) => f.element).join(" | ")).toMatch(/Plugins.*Refresh.*Normal/);
    await w.screenshot("focus-ring");
    // The first stop is the skip link; activating it moves focus into <main>.
    expect(stops[0]?.element).toContain("Skip to content");
    await visit(w.page, "plugins");
    await w.page.keyboard.press("Tab");
    await w.page.keyboard.press("Enter");
    expect(await w.page.evaluate(() => document.activeElement?.id)).toBe("main");
  });
});

describe("framing", { timeout: 60_000 }, () => {
  test("a page on another origin cannot frame the dashboard (clickjacking of its buttons)", async () => {
    const evil = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(`<p>win a prize</p><iframe src="${s.apiUrl}/#/plugins" width="800" height="600"></iframe>`));
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
    const view = await browser.open();
    try {
      await view.page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      // Chromium replaces a frame refused by X-Frame-Options / frame-ancestors with its error page.
      await expect.poll(() => view.page.frames().find((f) => f !== view.page.mainFrame())?.url()).toMatch(/^chrome-error:/);
      expect(await view.page.frameLocator("iframe").locator("nav").count()).toBe(0);
      await view.screenshot("framing-refused");
    } finally {
      await view.page.close();
      evil.close();
    }
  });
});

describe("plugins page", { timeout: 60_000 }, () => {
  test("a matcher switch in the UI changes the DNS answer; pause for N minutes shows when it ends", async () => {
    expect(await firstIp("ads.example")).toBe("0.0.0.0");
    await visit(w.page, "plugins");
    const matcher = w.page.getByTestId("matcher-blocked");
    await matcher.locator("button[data-mode=always_false]").click();
    await matcher.locator("button[data-mode=always_false][aria-pressed=true]").waitFor();
    expect(await firstIp("ads.example")).toBe("10.0.0.1");

    await matcher.locator("button[data-mode=normal]").click();
    await matcher.locator("button[data-mode=normal][aria-pressed=true]").waitFor();
    expect(await firstIp("ads.example")).toBe("0.0.0.0");

    await matcher.getByLabel("Minutes to pause blocked").fill("2");
    const before = Date.now();
    await matcher.getByRole("button", { name: "Pause", exact: true }).click();
    await w.page.getByTestId("matcher-blocked-status").getByText("back to normal in").waitFor();
    expect(await w.page.getByTestId("matcher-blocked-status").textContent()).toMatch(/always_false until \d\d:\d\d:\d\d \(back to normal in (1 min \d+ s|2 min 0 s)\)/);
    const status = (await (await s.api("/api/plugins/blocked/status")).json()) as { mode: string; until_ms: number };
    expect(status.mode).toBe("always_false");
    expect(status.until_ms).toBeGreaterThanOrEqual(before + 120_000 - 1000);
    expect(status.until_ms).toBeLessThanOrEqual(Date.now() + 120_000 + 1000);
    expect(await firstIp("ads.example")).toBe("10.0.0.1");
    await w.screenshot("plugins-matcher-paused");

    await matcher.locator("button[data-mode=normal]").click();
    await matcher.locator("button[data-mode=normal][aria-pressed=true]").waitFor();
    expect(await firstIp("ads.example")).toBe("0.0.0.0");
    expect(w.problems()).toEqual([]);
  });

  test("provider reload shows the rule count, a new count after the file changes, and a failed reload", async () => {
    await visit(w.page, "plugins");
    const provider = w.page.getByTestId("provider-ads");
    await provider.getByTestId("provider-ads-rules").getByText("2").waitFor();
    expect(await firstIp("new.example")).toBe("10.0.0.1");

    writeFileSync(join(s.dir, "ads.txt"), "ads.example\ntracker.example\nnew.example\nfour.example\nfive.example\n");
    await provider.getByRole("button", { name: "Reload rules" }).click();
    await provider.getByText("Reloaded: 5 rules in").waitFor();
    await provider.getByTestId("provider-ads-rules").getByText("5").waitFor();
    expect(await provider.textContent()).toContain("1 reloads, 0 failed");
    expect(await firstIp("new.example")).toBe("0.0.0.0");

    // A bad line: the reload fails, the old rules keep serving, and the page says so.
    writeFileSync(join(s.dir, "ads.txt"), "full:\n");
    await provider.getByRole("button", { name: "Reload rules" }).click();
    await provider.getByText("provider_reload_failed").waitFor();
    await provider.getByText("Last reload failed; the previous rules keep serving").waitFor();
    expect(await provider.getByTestId("provider-ads-rules").textContent()).toBe("5");
    expect(await firstIp("new.example")).toBe("0.0.0.0");
    await w.screenshot("plugins-provider");
    expect(w.problems([{ status: 400, path: "/api/plugins/ads/reload" }])).toEqual([]);
  });

  test("cache browser: entries of real queries, search, delete one, download the dump, flush", async () => {
    for (const name of ["alpha.test", "beta.test", "gamma.test"]) expect(await firstIp(name)).toBe("10.0.0.1");
    await visit(w.page, "plugins");
    const cache = w.page.getByTestId("cache-answers");
    await cache.locator("summary").first().click();
    for (const name of ["alpha.test", "beta.test", "gamma.test"]) await cache.locator(`tr[data-domain="${name}"]`).waitFor();

    await cache.getByLabel("Search answers by name").fill("ETA.te");
    await cache.getByRole("button", { name: "Search" }).click();
    await cache.getByText("Cache entries (1 matching)").waitFor();
    expect(await cache.locator("tbody tr").count()).toBe(1);
    await cache.getByRole("button", { name: "Delete beta.test A" }).click();
    await cache.getByText("Deleted beta.test A.").waitFor();
    const after = (await (await s.api("/api/plugins/answers/entries?qname=beta.test")).json()) as { total_entries: number };
    expect(after.total_entries).toBe(0);

    await cache.getByLabel("Search answers by name").fill("");
    await cache.getByRole("button", { name: "Search" }).click();
    await cache.locator('tr[data-domain="alpha.test"]').waitFor();
    const total = (await (await s.api("/api/plugins/answers/entries")).json()) as { total_entries: number };

    const [download] = await Promise.all([w.page.waitForEvent("download"), cache.getByRole("button", { name: "Download dump" }).click()]);
    expect(download.suggestedFilename()).toBe("answers.dump");
    const dump = readFileSync((await download.path()) ?? "");
    expect(dump.length).toBeGreaterThan(0);

    await cache.getByRole("button", { name: "Flush…" }).click();
    await cache.getByRole("button", { name: "Yes, remove every entry" }).click();
    await cache.getByText(`Flushed: ${total.total_entries} entries removed.`).waitFor();
    await cache.getByText("Cache entries (0)").waitFor();
    await w.screenshot("plugins-cache");

    // The downloaded file is a real dump: loading it back restores what was flushed.
    const loaded = (await (await s.api("/api/plugins/answers/load_dump", { method: "POST", body: dump })).json()) as { loaded_entries: number };
    expect(loaded.loaded_entries).toBe(total.total_entries);
    expect(w.problems()).toEqual([]);
  });
});

/** How many of the newest 200 entries at `level` or above carry `message` (what the page replays on connect). */
async function inRing(level: string, message: string): Promise<number> {
  const tail = (await (await s.api(`/api/logs?level=${level}&limit=200`)).json()) as { entries: { message: string }[] };
  return tail.entries.filter((e) => e.message === message).length;
}

describe("logs page", { timeout: 60_000 }, () => {
  test("shows live entries, filters by level, and holds entries while paused", async () => {
    await visit(w.page, "logs");
    await READY.logs(w.page);
    const list = w.page.getByTestId("log-list");
    const reloaded = list.locator("li", { hasText: "domain_set reloaded" });
    writeFileSync(join(s.dir, "ads.txt"), "ads.example\n");
    const seenBefore = await reloaded.count();
    await s.api("/api/plugins/ads/reload", { method: "POST" });
    await expect.poll(() => reloaded.count()).toBe(seenBefore + 1);

    // Minimum level warn: the stream reconnects with level=warn and only warn/error entries show.
    await w.page.getByTestId("log-level").selectOption("warn");
    await w.page.getByTestId("stream-state").getByText("live").waitFor();
    const failed = list.locator("li", { hasText: "reload failed; keeping the previous rules" });
    const failedBefore = await inRing("warn", "domain_set reload failed; keeping the previous rules");
    await expect.poll(() => failed.count()).toBe(failedBefore);
    writeFileSync(join(s.dir, "ads.txt"), "full:\n");
    await s.api("/api/plugins/ads/reload", { method: "POST" });
    await expect.poll(() => failed.count()).toBe(failedBefore + 1);
    const levels = await list.locator("li").evaluateAll((items) => items.map((li) => li.getAttribute("data-level")));
    expect(levels.length).toBeGreaterThan(0);
    expect(levels.filter((l) => l !== "warn" && l !== "error")).toEqual([]);

    // Paused: a new entry is held, not shown, until Resume.
    await w.page.getByTestId("log-level").selectOption("info");
    await w.page.getByTestId("stream-state").getByText("live").waitFor();
    // The replay on reconnect is drawn before pausing (entries arriving while paused are held).
    await expect.poll(() => reloaded.count()).toBe(await inRing("info", "domain_set reloaded"));
    await w.page.getByTestId("log-pause").click();
    await w.page.getByTestId("stream-state").getByText("paused").waitFor();
    writeFileSync(join(s.dir, "ads.txt"), "ads.example\nmore.example\n");
    const shownBefore = await reloaded.count();
    await s.api("/api/plugins/ads/reload", { method: "POST" });
    await w.page.getByTestId("log-pause").getByText(/Resume \(\d+ new\)/).waitFor();
    expect(await reloaded.count()).toBe(shownBefore);
    await w.screenshot("logs-paused");
    await w.page.getByTestId("log-pause").click();
    await expect.poll(() => reloaded.count()).toBe(shownBefore + 1);
    expect(w.problems()).toEqual([]);
  });
});
