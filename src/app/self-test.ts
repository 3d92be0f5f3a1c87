// `sluice check --self-test`: what a new release must manage before an upgrade switches to it,
// beyond reading the configuration: load its native addons (built for this platform and Node ABI).

/** Loads each native addon and uses it once; returns what it saw. Throws when one cannot load. */
export async function selfTest(): Promise<string> {
  const { default: Database } = await import("better-sqlite3");
  const db = new Database(":memory:");
  try {
    const row = db.prepare("select sqlite_version() as v").get() as { v: string };
    return `better-sqlite3 (SQLite ${row.v}), node ${process.versions.node} ABI ${process.versions.modules} on ${process.platform}-${process.arch}`;
  } finally {
    db.close();
  }
}
