// Helpers for zone-parser tests: parse one record, capture the parser's error, decode with dns-packet.

import dnsPacket from "dns-packet";
import type { Answer } from "dns-packet";
import { expect } from "vitest";
import { encodeMessage, type ResourceRecord } from "../../src/dns/message.js";
import { parseZone, ZoneError, type ZoneOptions } from "../../src/dns/zone/index.js";

export function parseOne(text: string, options?: ZoneOptions): ResourceRecord {
  const records = parseZone(text, options);
  expect(records).toHaveLength(1);
  return records[0];
}

/** The ZoneError the text produces; fails the test when it parses or throws something else. */
export function zoneError(text: string, options?: ZoneOptions): ZoneError {
  try {
    parseZone(text, options);
  } catch (err) {
    if (err instanceof ZoneError) return err;
    throw err;
  }
  throw new Error(`expected a ZoneError for ${JSON.stringify(text)}`);
}

/** A record as dns-packet decoded it; `data`'s shape depends on the type. */
export interface DecodedRecord {
  name: string;
  type: string;
  class: string | undefined;
  ttl: number | undefined;
  data: unknown;
}

/** dns-packet's answers without its OPT variant (which has no `data`). */
export function flattenAnswers(answers: Answer[] | undefined): DecodedRecord[] {
  return (answers ?? []).map((a) => {
    if (a.type === "OPT") throw new Error("unexpected OPT record among the answers");
    return { name: a.name, type: a.type, class: a.class, ttl: a.ttl, data: a.data };
  });
}

/** Puts the records in a response as we encode it and decodes it with dns-packet. */
export function viaDnsPacket(records: ResourceRecord[]): DecodedRecord[] {
  const wire = encodeMessage({ id: 1, flags: 0x8000, questions: [], answers: records, authorities: [], additionals: [], edns: null });
  return flattenAnswers(dnsPacket.decode(wire).answers);
}

/** The text of TXT strings as dns-packet decoded them. */
export function txtStrings(data: unknown): string[] {
  return (data as Buffer[]).map((b) => b.toString());
}

export function decodedOne(text: string, options?: ZoneOptions): DecodedRecord {
  const answers = viaDnsPacket([parseOne(text, options)]);
  expect(answers).toHaveLength(1);
  return answers[0];
}
