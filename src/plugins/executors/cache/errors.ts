// Typed errors of the cache's API-facing functions; `code` is the API error code a route returns.

import { RouteError } from "../../../registry/control.js";

export class CacheApiError extends RouteError {
  constructor(code: "invalid_cache_dump" | "invalid_cache_entry_id" | "invalid_query" | "cache_entry_not_found", message: string) {
    super(code, message);
    this.name = new.target.name;
  }
}

/** The bytes given to `load` (or read from dump_file) are not a dump this version can read. */
export class InvalidDumpError extends CacheApiError {
  constructor(message: string) {
    super("invalid_cache_dump", message);
  }
}

/** An entry id that this cache could not have handed out. */
export class InvalidEntryIdError extends CacheApiError {
  constructor(message = "not a cache entry id") {
    super("invalid_cache_entry_id", message);
  }
}

/** A bad `limit` or `cursor` for `entries`. */
export class InvalidQueryError extends CacheApiError {
  constructor(message: string) {
    super("invalid_query", message);
  }
}
