// A real browser for the dashboard tests: Debian's Chromium (never a downloaded one) driven by
// playwright-core, headless. Each test file gets a fresh browser context of its own (no cookies,
// storage or cache from another file); the Chromium process under it is started once per vitest
// worker and kept for the next file the worker runs (files run one after another in a worker:
// isolate false), and ends with the worker. Every page records console errors and uncaught
// exceptions, so a test can assert that none happened; screenshots go to test-output/.

import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env.SLUICE_CHROMIUM ?? "/usr/bin/chromium";
/** Where screenshots go (gitignored). */
export const OUTPUT_DIR = join(import.meta.dirname, "..", "..", "test-output", "browser");

export const DESKTOP = { width: 1280, height: 800 } as const;
export const PHONE = { width: 390, height: 844 } as const;

/** An HTTP error response (or, with status "network", a refused or broken connection) the test provokes on purpose: Chromium logs it as a console error. */
export interface ExpectedHttpError {
  status: number | "network";
  /** Path of the request (without query), e.g. /api/healthz. */
  path: string;
}

export interface WatchedPage {
  page: Page;
  /** Console errors and uncaught exceptions since the last call, minus the HTTP errors declared as expected. */
  problems(expected?: ExpectedHttpError[]): string[];
  screenshot(name: string): Promise<string>;
}

export interface TestBrowser {
  open(viewport?: { width: number; height: number }): Promise<WatchedPage>;
  close(): Promise<void>;
}

const FAILED_LOAD = /^Failed to load resource: (?:the server responded with a status of (\d+)|(net::ERR_\w+))/;

/** This worker's Chromium (a launch costs a second or two of a busy machine's time), started at first use. */
let shared: Promise<Browser> | null = null;

async function sharedChromium(): Promise<Browser> {
  const launch = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  shared ??= launch();
  let browser: Browser;
  try {
    browser = await shared;
  } catch (err) {
    shared = null;
    throw err;
  }
  // One that crashed or was closed is replaced.
  if (!browser.isConnected()) {
    shared = launch();
    browser = await shared;
  }
  return browser;
}

export async function launchBrowser(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`the browser tests need Chromium at ${CHROMIUM} (Debian package chromium; npm test installs it, or set SLUICE_CHROMIUM)`);
  mkdirSync(OUTPUT_DIR, { recursive: true });
  const context: BrowserContext = await (await sharedChromium()).newContext({ viewport: DESKTOP, acceptDownloads: true });
  return {
    async open(viewport = DESKTOP) {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      page.setDefaultTimeout(10_000);
      const seen: { text: string; url: string }[] = [];
      page.on("console", (m) => {
        if (m.type() === "error") seen.push({ text: m.text(), url: m.location().url });
      });
      page.on("pageerror", (e) => seen.push({ text: `uncaught: ${e.message}`, url: "" }));
      return {
        page,
        problems(expected = []) {
          return seen
            .splice(0)
            .filter(({ text, url }) => {
              const m = FAILED_LOAD.exec(text);
              if (m === null) return true;
              const status = m[2] !== undefined ? "network" : m[1];
              const path = url ? new URL(url).pathname : "";
              return !expected.some((e) => String(e.status) === status && e.path === path);
            })
            .map(({ text, url }) => `${text}${url ? ` (${url})` : ""}`);
        },
        async screenshot(name) {
          const path = join(OUTPUT_DIR, `${name}.png`);
          await page.screenshot({ path, fullPage: true });
          return path;
        },
      };
    },
    async close() {
      // The file's context and its pages; the Chromium under it stays for the worker's next file.
      await context.close();
    },
  };
}

/** What does not fit the viewport: sideways scrolling of the page, and visible controls beyond its right edge. */
export async function overflow(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const width = window.innerWidth;
    if (document.documentElement.scrollWidth > width) out.push(`page is ${document.documentElement.scrollWidth}px wide in a ${width}px viewport`);
    for (const el of document.querySelectorAll<HTMLElement>("a, button, input, select, textarea, summary")) {
      // Controls inside a box that scrolls on its own (wide tables) are reachable by scrolling that box.
      if (el.closest(".table-wrap")) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.right > width + 1 || r.left < -1) out.push(`${el.tagName.toLowerCase()} "${(el.textContent ?? el.getAttribute("aria-label") ?? "").trim().slice(0, 40)}" spans ${Math.round(r.left)}..${Math.round(r.right)}px`);
    }
    return out;
  });
}

export interface FocusStop {
  element: string;
  outline: string;
  visible: boolean;
}

/** Presses Tab `stops` times; for each element that gets focus, whether a focus ring is drawn. */
export async function tabThrough(page: Page, stops: number): Promise<FocusStop[]> {
  const out: FocusStop[] = [];
  for (let i = 0; i < stops; i++) {
    await page.keyboard.press("Tab");
    out.push(
      await page.evaluate(() => {
        const el = document.activeElement as HTMLElement | null;
        if (!el || el === document.body) return { element: "body", outline: "none", visible: false };
        const s = getComputedStyle(el);
        const width = parseFloat(s.outlineWidth);
        const ring = s.outlineStyle !== "none" && width >= 2;
        const shadow = s.boxShadow !== "none" && s.boxShadow !== "";
        const name = `${el.tagName.toLowerCase()} "${(el.textContent ?? el.getAttribute("aria-label") ?? "").trim().slice(0, 30)}"`;
        return { element: name, outline: `${s.outlineStyle} ${s.outlineWidth} ${s.outlineColor}`, visible: ring || shadow };
      }),
    );
  }
  return out;
}
