// Configuration problems as the management API reports them: one line of text per problem plus
// a located record (file, line, column, end) a WebUI editor can underline.

import { formatDiagnostic, type ConfigError, type Diagnostic } from "./diagnostics.js";

/** More problems than this are summarised by one last line; a broken 20 MB file must not echo itself. */
export const MAX_REPORTED = 200;

export interface DiagnosticDetail {
  message: string;
  severity: "error";
  /** Null for text validated from a request body. */
  file: string | null;
  line: number;
  column: number;
  end_line: number;
  end_column: number;
}

export interface DiagnosticReport {
  diagnostics: string[];
  diagnostic_details: DiagnosticDetail[];
}

export function diagnosticReport(list: readonly Diagnostic[]): DiagnosticReport {
  const shown = list.slice(0, MAX_REPORTED);
  const diagnostics = shown.map(formatDiagnostic);
  if (list.length > shown.length) diagnostics.push(`... and ${list.length - shown.length} more problems`);
  return {
    diagnostics,
    diagnostic_details: shown.map((d) => ({
      message: d.message,
      severity: "error",
      file: d.file,
      line: d.line,
      column: d.column,
      end_line: d.endLine,
      end_column: d.endColumn,
    })),
  };
}

/** One sentence for the error `message`: the first problem and how many others there are. */
export function problemSummary(err: ConfigError): string {
  const first = err.diagnostics[0];
  if (!first) return err.message;
  const more = err.diagnostics.length - 1;
  return `${formatDiagnostic(first)}${more > 0 ? ` (and ${more} more problem${more === 1 ? "" : "s"})` : ""}`;
}
