// The dashboard's event-stream parser (webui/src/sse-parser.ts): the log stream arrives in chunks
// that split lines, fields and CRLF pairs anywhere; every split must give the same events.
import { expect, test } from "vitest";
import { SseParser, type StreamEvent } from "../../webui/src/sse-parser.js";

function parse(chunks: string[]): { events: StreamEvent[]; parser: SseParser } {
  const events: StreamEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  for (const c of chunks) parser.push(c);
  return { events, parser };
}

// What the log route sends: a heartbeat comment, events with id and JSON data, a dropped notice.
const STREAM = ': heartbeat\n\nid: 7\nevent: log\ndata: {"id":7,"message":"a: b"}\n\nid: 8\nevent: log\ndata: {"id":8}\n\nevent: dropped\ndata: {"dropped":3}\n\n';
const EXPECTED: StreamEvent[] = [
  { event: "log", data: '{"id":7,"message":"a: b"}', id: "7" },
  { event: "log", data: '{"id":8}', id: "8" },
  // The last event ID persists to later events, as in EventSource.
  { event: "dropped", data: '{"dropped":3}', id: "8" },
];

test("the log stream's frames become events; comments are skipped; the last id is kept for Last-Event-ID", () => {
  const { events, parser } = parse([STREAM]);
  expect(events).toEqual(EXPECTED);
  expect(parser.lastId).toBe("8");
});

test("every split of the stream into two chunks, and one character at a time, gives the same events", () => {
  for (let cut = 0; cut <= STREAM.length; cut++) expect(parse([STREAM.slice(0, cut), STREAM.slice(cut)]).events, `cut at ${cut}`).toEqual(EXPECTED);
  expect(parse([...STREAM]).events).toEqual(EXPECTED);
});

test("CRLF and CR line ends, split between chunks, are one line end each", () => {
  for (const eol of ["\r\n", "\r"]) {
    const text = STREAM.replaceAll("\n", eol);
    for (let cut = 0; cut <= text.length; cut++) expect(parse([text.slice(0, cut), "", text.slice(cut)]).events, `${JSON.stringify(eol)} cut at ${cut}`).toEqual(EXPECTED);
  }
});

test("multi-line data joins with newlines; no space or one space after the colon; events without data are not dispatched", () => {
  const { events, parser } = parse(["data:one\ndata: two\ndata:  three\n\nevent: empty\n\nretry: 2500\ndata\n\n"]);
  expect(events).toEqual([
    { event: "message", data: "one\ntwo\n three", id: null },
    { event: "message", data: "", id: null },
  ]);
  expect(parser.retryMs).toBe(2500);
});

test("reset drops a half-received event but keeps the id to resume from", () => {
  const events: StreamEvent[] = [];
  const parser = new SseParser((e) => events.push(e));
  parser.push("id: 41\nevent: log\ndata: {}\n\nid: 42\nevent: log\ndata: {\"half");
  parser.reset();
  parser.push("id: 43\nevent: log\ndata: {}\n\n");
  expect(events.map((e) => e.id)).toEqual(["41", "43"]);
  expect(parser.lastId).toBe("43");
});
