// Redis URLs as configuration values: checked, and named without their credentials. Kept apart
// from the client so configuration checks (worker threads, `sluice check`) do not load it.

/** Problems with a Redis URL as a configuration value (null when usable). */
export function redisUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "the Redis URL is not a URL (redis://[user:password@]host:port[/db])";
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") return `Redis URL must start with redis:// or rediss:// (TLS), not ${u.protocol}//`;
  if (u.hostname === "") return "Redis URL needs a host";
  if (u.pathname !== "" && u.pathname !== "/" && !/^\/\d{1,2}$/.test(u.pathname)) return "Redis URL path must be a database number (/0 ... /15)";
  return null;
}

/** host:port/db of a Redis URL, without credentials. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    const db = u.pathname.replace(/^\//, "") || "0";
    return `${u.hostname}:${u.port || "6379"}/${db}`;
  } catch {
    return "(unparsable URL)";
  }
}
