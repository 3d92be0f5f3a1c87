// What `sluice check` prints for a configuration file, computed in-process (no child process).

import { checkConfig } from "../../src/app/app.js";
import { ConfigError, formatDiagnostic } from "../../src/config/diagnostics.js";
import { createCatalog } from "../../src/plugins/catalog.js";

/** Every diagnostic as `file:line:column: error: message`, one a line; throws if the file is valid. */
export function checkErrors(path: string): string {
  try {
    checkConfig(path, createCatalog());
  } catch (err) {
    if (err instanceof ConfigError) return err.diagnostics.map(formatDiagnostic).join("\n");
    throw err;
  }
  throw new Error(`${path} is valid`);
}
