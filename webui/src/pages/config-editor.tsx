// The configuration text editor: a plain textarea (no code-editor bundle) with a line-number gutter
// that marks the lines diagnostics point at, and a list of diagnostics that moves the caret to each
// problem's line and column.

import type { RefObject } from "preact";
import { useRef } from "preact/hooks";

/** One problem as the API reports it (diagnostic_details): 1-based, end exclusive. */
export interface Diagnostic {
  message: string;
  severity: string;
  file: string | null;
  line: number;
  column: number;
  end_line: number;
  end_column: number;
}

/** Line height of the editor in px (styles.css uses the same). */
const LINE_PX = 20;

/** The character offset of a 1-based line and column in `text` (clamped to the text). */
export function offsetOf(text: string, line: number, column: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const next = text.indexOf("\n", offset);
    if (next < 0) return text.length;
    offset = next + 1;
  }
  const lineEnd = text.indexOf("\n", offset);
  return Math.min(offset + Math.max(0, column - 1), lineEnd < 0 ? text.length : lineEnd);
}

/** Selects a problem's range in the textarea and scrolls it into view. */
export function showProblem(area: HTMLTextAreaElement | null, d: Diagnostic): void {
  if (area === null) return;
  const start = offsetOf(area.value, d.line, d.column);
  const end = Math.max(start, offsetOf(area.value, d.end_line, d.end_column));
  area.focus();
  area.setSelectionRange(start, end === start ? start + 1 : end);
  area.scrollTop = Math.max(0, (d.line - 1) * LINE_PX - area.clientHeight / 3);
}

export interface EditorProps {
  value: string;
  onInput: (value: string) => void;
  /** Problems in this file, by line. */
  marks: ReadonlyMap<number, string>;
  areaRef: RefObject<HTMLTextAreaElement | null>;
  readOnly?: boolean;
}

export function ConfigEditor({ value, onInput, marks, areaRef, readOnly }: EditorProps) {
  const gutter = useRef<HTMLDivElement>(null);
  const lines = value.split("\n").length;
  const numbers = [];
  for (let n = 1; n <= lines; n++) {
    const problem = marks.get(n);
    numbers.push(
      <div key={n} class={problem ? "gutter-line gutter-error" : "gutter-line"} data-line={n} title={problem}>
        {problem ? <span aria-label={`line ${n}: ${problem}`}>{n}</span> : n}
      </div>,
    );
  }
  return (
    <div class="editor">
      <div class="gutter" ref={gutter} aria-hidden="true" data-testid="editor-gutter">
        {numbers}
        {/* Room for the textarea's horizontal scrollbar, so the last numbers stay aligned. */}
        <div class="gutter-line" />
      </div>
      <textarea
        ref={areaRef}
        class="code"
        value={value}
        readOnly={readOnly}
        spellcheck={false}
        wrap="off"
        autocapitalize="off"
        autocomplete="off"
        aria-label="Configuration (YAML)"
        data-testid="config-text"
        onInput={(e) => onInput((e.currentTarget).value)}
        onScroll={(e) => {
          if (gutter.current) gutter.current.scrollTop = (e.currentTarget).scrollTop;
        }}
      />
    </div>
  );
}

/** The diagnostics as a list; each entry jumps to its place in the editor. */
export function DiagnosticList({ items, configPath, onShow }: { items: Diagnostic[]; configPath: string | null; onShow: (d: Diagnostic) => void }) {
  if (items.length === 0) return null;
  return (
    <ol class="diagnostics" data-testid="diagnostics" aria-label="Problems">
      {items.map((d, i) => {
        const here = d.file === null || d.file === configPath;
        return (
          <li key={i} data-line={d.line} data-column={d.column}>
            {here ? (
              <button type="button" class="link" onClick={() => onShow(d)}>
                Line {d.line}, column {d.column}
              </button>
            ) : (
              <span class="mono">
                {d.file}:{d.line}:{d.column}
              </span>
            )}
            : {d.message}
          </li>
        );
      })}
    </ol>
  );
}
