// v2ray's geosite.dat and geoip.dat (schema: app/router/config.proto):
//   GeoSiteList { repeated GeoSite entry = 1 }
//   GeoSite     { string country_code = 1; repeated Domain domain = 2 }
//   Domain      { Type type = 1; string value = 2; repeated Attribute attribute = 3 }
//               Type: Plain = 0 (substring), Regex = 1, Domain = 2 (RootDomain), Full = 3
//   Attribute   { string key = 1; oneof { bool bool_value = 2; int64 int_value = 3 } }
//   GeoIPList   { repeated GeoIP entry = 1 }
//   GeoIP       { string country_code = 1; repeated CIDR cidr = 2; bool reverse_match = 3 }
//   CIDR        { bytes ip = 1; uint32 prefix = 2 }
// Only the selected lists are decoded; the others are skipped by length. Decoding runs in slices
// that yield to the event loop (engine/rules/slicer.ts), so a big file never stalls DNS.

import { Slicer } from "../../../engine/rules/slicer.js";
import { ProtoReader, WireType, expectWire, type Field } from "./protobuf.js";

export const DomainType = { plain: 0, regex: 1, domain: 2, full: 3 } as const;

/** Lists wanted, by upper-case code; each maps to attribute filters (empty filter: the whole list). */
export type Selection = Map<string, string[][]> | null;


/** Every entry's code and a reader factory for its body; an unselected body is never decoded. */
function* entries(buf: Uint8Array): Generator<{ code: string; body: () => ProtoReader }> {
  const list = new ProtoReader(buf);
  for (let f = list.next(); f !== null; f = list.next()) {
    if (f.number !== 1) continue;
    expectWire(f, WireType.len, "entry");
    const { start, end } = f;
    const body = (): ProtoReader => new ProtoReader(buf, start, end);
    const scan = body();
    let code = "";
    for (let g = scan.next(); g !== null; g = scan.next()) {
      if (g.number === 1) {
        expectWire(g, WireType.len, "country_code");
        code = scan.text(g).toUpperCase();
        break;
      }
    }
    yield { code, body };
  }
}

/** Codes of every list in the file, in file order (for error messages). */
export function listCodes(buf: Uint8Array): string[] {
  return [...entries(buf)].map((e) => e.code);
}

function domainAttrs(r: ProtoReader, f: Field): string[] {
  const a = r.sub(f);
  for (let g = a.next(); g !== null; g = a.next()) {
    if (g.number === 1) {
      expectWire(g, WireType.len, "attribute key");
      return [a.text(g).toLowerCase()];
    }
  }
  return [];
}

/**
 * Calls `onDomain` for every domain of the selected geosite lists (all lists when `selection` is
 * null). Returns the selected codes the file has. Throws ProtobufError for a corrupt file.
 */
export async function readGeoSite(buf: Uint8Array, selection: Selection, onDomain: (type: number, value: string, code: string) => void, slicer = new Slicer()): Promise<Set<string>> {
  const found = new Set<string>();
  for (const { code, body } of entries(buf)) {
    const filters = selection === null ? [[]] : selection.get(code);
    if (filters === undefined) continue;
    found.add(code);
    const wholeList = filters.some((f) => f.length === 0);
    const list = body();
    for (let f = list.next(); f !== null; f = list.next()) {
      if (f.number !== 2) continue;
      expectWire(f, WireType.len, "domain");
      const d = list.sub(f);
      let type: number = DomainType.plain;
      let value = "";
      const attrs: string[] = [];
      for (let g = d.next(); g !== null; g = d.next()) {
        if (g.number === 1) {
          expectWire(g, WireType.varint, "domain type");
          type = g.value;
        } else if (g.number === 2) {
          expectWire(g, WireType.len, "domain value");
          value = d.text(g);
        } else if (g.number === 3 && !wholeList) {
          expectWire(g, WireType.len, "attribute");
          attrs.push(...domainAttrs(d, g));
        }
      }
      if (wholeList || filters.some((need) => need.every((a) => attrs.includes(a)))) onDomain(type, value, code);
      if (slicer.due()) await slicer.pause();
    }
  }
  return found;
}

/**
 * Calls `onList` for each selected geoip list (all when `selection` is null) and `onCidr` for each
 * of its CIDRs. Returns the selected codes the file has.
 */
export async function readGeoIp(
  buf: Uint8Array,
  selection: ReadonlySet<string> | null,
  onList: (code: string, reverse: boolean) => void,
  onCidr: (ip: Uint8Array, prefix: number) => void,
  slicer = new Slicer(),
): Promise<Set<string>> {
  const found = new Set<string>();
  for (const { code, body } of entries(buf)) {
    if (selection !== null && !selection.has(code)) continue;
    found.add(code);
    // reverse_match may come after the CIDRs: a first pass reads it.
    let reverse = false;
    const flags = body();
    for (let f = flags.next(); f !== null; f = flags.next()) {
      if (f.number === 3) {
        expectWire(f, WireType.varint, "reverse_match");
        reverse = f.value !== 0;
      }
    }
    onList(code, reverse);
    const list = body();
    for (let f = list.next(); f !== null; f = list.next()) {
      if (f.number !== 2) continue;
      expectWire(f, WireType.len, "cidr");
      const c = list.sub(f);
      let ip: Uint8Array = new Uint8Array(0);
      let prefix = 0;
      for (let g = c.next(); g !== null; g = c.next()) {
        if (g.number === 1) {
          expectWire(g, WireType.len, "cidr ip");
          ip = c.bytes(g);
        } else if (g.number === 2) {
          expectWire(g, WireType.varint, "cidr prefix");
          prefix = g.value;
        }
      }
      onCidr(ip, prefix);
      if (slicer.due()) await slicer.pause();
    }
  }
  return found;
}
