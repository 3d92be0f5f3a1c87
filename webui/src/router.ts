// Hash routing (#/plugins): the page itself is always the index, so the dashboard works from any
// path it is served at, and reloading a page never asks the server for a route it does not know.

import { signal } from "@preact/signals";

const parse = (hash: string): string => hash.replace(/^#\/?/, "").split(/[?/]/)[0] ?? "";

/** The current page id ("" for the start page). */
export const route = signal<string>(parse(location.hash));

addEventListener("hashchange", () => {
  route.value = parse(location.hash);
});

export const href = (page: string): string => `#/${page}`;
