// `sluice import <source> <file or dir>`: a configuration another DNS tool runs, turned into a Sluice
// configuration (and the rule files it needs) that does what the source did. What has no equivalent
// is never dropped silently: it is listed at the top of the written file as comments and on stderr.

/** The tools whose configuration can be imported. */
export const IMPORT_SOURCES = ["adguardhome", "pihole", "blocky", "mosdns"] as const;
export type ImportSource = (typeof IMPORT_SOURCES)[number];

export interface ImportResult {
  /** The Sluice configuration as YAML text, without the header of unsupported settings (the writer adds it). */
  yaml: string;
  /** Files the configuration names, relative to the output directory (rule lists, hosts files). */
  files: Record<string, string>;
  /** Settings of the source with no equivalent here: one line each, naming the source key and its value. */
  unsupported: string[];
  /** Choices the importer made that an operator should know (e.g. "listen 0.0.0.0:53 kept as it was"). */
  notes: string[];
}

/** Reads the source's configuration at `path` (a file or a directory, as the source keeps it). Throws ImportError. */
export type Importer = (path: string) => Promise<ImportResult>;

/** The source configuration could not be read or is not of that tool: the message says where and why. */
export class ImportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImportError";
  }
}
