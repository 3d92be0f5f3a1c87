// Hash routing (#/plugins, #/queries?qname=example): the page itself is always the index, so the
// dashboard works from any path it is served at, and reloading a page never asks the server for a
// route it does not know. Parameters after `?` let one page open another already filtered.

import { signal } from "@preact/signals";

const parse = (hash: string): string => hash.replace(/^#\/?/, "").split(/[?/]/)[0] ?? "";

function paramsOf(hash: string): URLSearchParams {
  const at = hash.indexOf("?");
  return new URLSearchParams(at < 0 ? "" : hash.slice(at + 1));
}

/** The current page id ("" for the start page). */
export const route = signal<string>(parse(location.hash));
/** The parameters of the current route (after `?` in the hash). */
export const routeParams = signal<URLSearchParams>(paramsOf(location.hash));

addEventListener("hashchange", () => {
  route.value = parse(location.hash);
  routeParams.value = paramsOf(location.hash);
});

/** The link to a page, with parameters (empty values left out). */
export function href(page: string, params: Record<string, string> = {}): string {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "")).toString();
  return `#/${page}${query ? `?${query}` : ""}`;
}
