// RDATA from text: the per-type parsers, or the RFC 3597 generic form `\# <length> <hex>` for any
// type. Generic data for a known type is checked so it cannot break a message it is put in.

import { QCLASS, QTYPE, typeName } from "../constants.js";
import { WireFormatError } from "../name.js";
import { WireWriter } from "../writer.js";
import { EntryError } from "./errors.js";
import { intField, type ZoneName } from "./fields.js";
import type { Token } from "./lexer.js";
import { BASIC_TYPES, type RdataSpec } from "./rdata-basic.js";
import { KEY_TYPES } from "./rdata-keys.js";
import { SVCB_TYPES } from "./rdata-svcb.js";
import { RdataReader } from "./reader.js";

const SPECS: ReadonlyMap<number, RdataSpec> = new Map([...BASIC_TYPES, ...KEY_TYPES, ...SVCB_TYPES]);

/** Types whose text form this parser knows (the rest need the generic form). */
export const TEXT_FORM_TYPES: readonly number[] = [...SPECS.keys()];

const writer = new WireWriter();

export function encodeRdata(type: number, klass: number, tokens: readonly Token[], origin: ZoneName, line: number): Buffer {
  const label = typeName(type);
  const first = tokens[0];
  if (first !== undefined && !first.quoted && first.text === "\\#") return genericRdata(type, klass, tokens, line);
  const spec = SPECS.get(type);
  if (!spec) throw new EntryError(`${label} has no text form here; write its data as \\# <length> <hex>`, line);
  const r = new RdataReader(tokens, origin, label, spec.usage, line);
  writer.reset(false);
  try {
    spec.parse(r, writer);
  } catch (err) {
    if (err instanceof WireFormatError) throw new EntryError(`${label} record data is longer than 65535 bytes`, line);
    throw err;
  }
  r.end();
  return writer.finish();
}

function genericRdata(type: number, klass: number, tokens: readonly Token[], line: number): Buffer {
  const lengthToken = tokens[1];
  if (lengthToken === undefined) throw new EntryError("\\# needs a length and hex data", line);
  const length = intField(lengthToken, 0xffff, "\\# length");
  let hex = "";
  for (let i = 2; i < tokens.length; i++) hex += tokens[i].text;
  if (!/^[0-9a-fA-F]*$/.test(hex) || hex.length % 2 !== 0) throw new EntryError("\\# data must be an even number of hex digits", tokens[2]?.line ?? line);
  if (hex.length / 2 !== length) throw new EntryError(`\\# length ${length} does not match the ${hex.length / 2} bytes of data given`, line);
  const data = Buffer.from(hex, "hex");
  const problem = genericProblem(type, klass, data);
  if (problem !== null) throw new EntryError(`\\# data is not a valid ${typeName(type)}: ${problem}`, line);
  return data;
}

type Part = "name" | number;
/** Wire layouts of the types that embed names: fixed-size parts are byte counts. */
const NAME_LAYOUTS: ReadonlyMap<number, readonly Part[]> = new Map<number, readonly Part[]>([
  [QTYPE.NS, ["name"]], [QTYPE.MD, ["name"]], [QTYPE.MF, ["name"]], [QTYPE.CNAME, ["name"]],
  [QTYPE.MB, ["name"]], [QTYPE.MG, ["name"]], [QTYPE.MR, ["name"]], [QTYPE.PTR, ["name"]],
  [QTYPE.DNAME, ["name"]], [QTYPE.SOA, ["name", "name", 20]], [QTYPE.MINFO, ["name", "name"]],
  [QTYPE.RP, ["name", "name"]], [QTYPE.MX, [2, "name"]], [QTYPE.AFSDB, [2, "name"]],
  [QTYPE.RT, [2, "name"]], [QTYPE.KX, [2, "name"]], [QTYPE.PX, [2, "name", "name"]],
  [QTYPE.SRV, [6, "name"]],
]);

/** Null when `data` is sound for the type; otherwise what is wrong. */
function genericProblem(type: number, klass: number, data: Buffer): string | null {
  if (klass === QCLASS.IN && type === QTYPE.A && data.length !== 4) return "an A record has 4 bytes";
  if (klass === QCLASS.IN && type === QTYPE.AAAA && data.length !== 16) return "an AAAA record has 16 bytes";
  const layout = NAME_LAYOUTS.get(type);
  if (!layout) return null;
  let pos = 0;
  for (const part of layout) {
    if (typeof part === "number") {
      pos += part;
      if (pos > data.length) return "it is shorter than the type requires";
      continue;
    }
    let size = 0;
    for (;;) {
      if (pos >= data.length) return "a name runs past the end";
      const len = data[pos];
      if (len === 0) break;
      // Compression pointers would point into whatever message the record lands in.
      if (len > 63) return "a name uses compression or a reserved label type";
      size += len + 1;
      if (size > 254) return "a name is longer than 255 bytes";
      pos += len + 1;
    }
    pos++;
  }
  return pos === data.length ? null : "it is longer than the type allows";
}
