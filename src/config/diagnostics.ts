// Problems found in a configuration, each pointing at a file, line and column (src/config/source.ts
// finds them in a file's YAML).

export interface Diagnostic {
  /** File the problem is in; null for text validated from a request body. */
  file: string | null;
  /** 1-based. */
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
  message: string;
  /** The API error code this problem calls for instead of the route's usual one (yaml_alias_limit). */
  code?: string;
}

/** A configuration that cannot be used, with every problem found. */
export class ConfigError extends Error {
  readonly diagnostics: Diagnostic[];
  /** The first problem's own API error code, when one has it; null means the route's usual code. */
  readonly code: string | null;
  constructor(diagnostics: Diagnostic[]) {
    super(diagnostics.map((d) => d.message).join("; "));
    this.name = "ConfigError";
    this.diagnostics = diagnostics;
    this.code = diagnostics.find((d) => d.code !== undefined)?.code ?? null;
  }
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file ?? "<config>"}:${d.line}:${d.column}: error: ${d.message}`;
}

export type YamlPath = readonly (string | number)[];

/** Renders a path the way operators read it: plugins[3].args.upstreams[0].addr */
export function renderPath(path: YamlPath): string {
  let out = "";
  for (const seg of path) out += typeof seg === "number" ? `[${seg}]` : out.length === 0 ? seg : `.${seg}`;
  return out.length === 0 ? "<root>" : out;
}
