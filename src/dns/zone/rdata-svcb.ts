// Text form of SVCB and HTTPS (RFC 9460): SvcPriority, TargetName, then key=value SvcParams,
// written on the wire in key order.

import { QTYPE } from "../constants.js";
import { parseIPv4, parseIPv6 } from "../ip.js";
import { EntryError } from "./errors.js";
import { decodeText, type Token } from "./lexer.js";
import type { RdataSpec } from "./rdata-basic.js";
import { base64Field, type RdataReader } from "./reader.js";

const KEY = { mandatory: 0, alpn: 1, "no-default-alpn": 2, port: 3, ipv4hint: 4, ech: 5, ipv6hint: 6, dohpath: 7, ohttp: 8 } as const;
const KEY_BY_NAME: ReadonlyMap<string, number> = new Map(Object.entries(KEY));
const NAME_BY_KEY: ReadonlyMap<number, string> = new Map(Object.entries(KEY).map(([k, v]) => [v, k]));
/** 65535 is the reserved "invalid key". */
const MAX_KEY = 65534;

function keyNumber(text: string): number | undefined {
  const lower = text.toLowerCase();
  const known = KEY_BY_NAME.get(lower);
  if (known !== undefined) return known;
  const m = /^key(\d{1,5})$/.exec(lower);
  return m && Number(m[1]) <= MAX_KEY ? Number(m[1]) : undefined;
}

function keyLabel(key: number): string {
  return NAME_BY_KEY.get(key) ?? `key${key}`;
}

/** Splits a decoded value-list on commas; `\,` and `\\` stand for a literal comma and backslash. */
function splitList(value: Buffer, fail: (message: string) => never): Buffer[] {
  const items: Buffer[] = [];
  let current: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const b = value[i];
    if (b === 0x5c) {
      if (i + 1 >= value.length) fail("ends with a lone '\\'");
      current.push(value[++i]);
    } else if (b === 0x2c) {
      items.push(Buffer.from(current));
      current = [];
    } else {
      current.push(b);
    }
  }
  items.push(Buffer.from(current));
  if (items.some((item) => item.length === 0)) fail("has an empty item in its list");
  return items;
}

function encodeValue(key: number, value: Buffer | null, fail: (message: string) => never): Buffer {
  const needValue = (): Buffer => {
    if (value === null || value.length === 0) fail("needs a value");
    return value;
  };
  switch (key) {
    case KEY.mandatory: {
      const keys = splitList(needValue(), fail).map((item) => {
        const k = keyNumber(item.toString("latin1"));
        if (k === undefined) fail(`lists an unknown key '${item.toString("latin1")}'`);
        if (k === KEY.mandatory) fail("cannot list itself");
        return k;
      });
      keys.sort((a, b) => a - b);
      for (let i = 1; i < keys.length; i++) if (keys[i] === keys[i - 1]) fail(`lists '${keyLabel(keys[i])}' twice`);
      const out = Buffer.alloc(keys.length * 2);
      keys.forEach((k, i) => out.writeUInt16BE(k, i * 2));
      return out;
    }
    case KEY.alpn: {
      const ids = splitList(needValue(), fail);
      for (const id of ids) if (id.length > 255) fail("has a protocol id longer than 255 bytes");
      return Buffer.concat(ids.flatMap((id) => [Buffer.from([id.length]), id]));
    }
    case KEY["no-default-alpn"]:
    case KEY.ohttp:
      if (value !== null && value.length > 0) fail("takes no value");
      return Buffer.alloc(0);
    case KEY.port: {
      const text = needValue().toString("latin1");
      if (!/^\d{1,5}$/.test(text) || Number(text) > 0xffff) fail(`must be a port 0-65535, got '${text}'`);
      const out = Buffer.alloc(2);
      out.writeUInt16BE(Number(text));
      return out;
    }
    case KEY.ipv4hint:
    case KEY.ipv6hint: {
      const parse = key === KEY.ipv4hint ? parseIPv4 : (t: string): Uint8Array | null => (t.includes(":") ? parseIPv6(t) : null);
      const ips = splitList(needValue(), fail).map((item) => {
        const ip = parse(item.toString("latin1"));
        if (!ip) fail(`has a bad address '${item.toString("latin1")}'`);
        return ip;
      });
      return Buffer.concat(ips);
    }
    case KEY.ech:
      return base64Field(needValue().toString("latin1"), () => fail("must be base64"));
    case KEY.dohpath:
      return needValue();
    default:
      return value ?? Buffer.alloc(0);
  }
}

function svcb(type: string): RdataSpec {
  return {
    usage: `${type} needs a priority and a target name`,
    parse(r: RdataReader, w) {
      const priority = r.u16("priority");
      const target = r.name();
      const params = new Map<number, Buffer>();
      while (r.remaining > 0) {
        const t: Token = r.next();
        if (t.quoted) r.fail(`SvcParam must be written key=value, got a quoted "${t.text}"`, t);
        const eq = t.text.indexOf("=");
        const keyText = eq < 0 ? t.text : t.text.slice(0, eq);
        const key = keyNumber(keyText);
        if (key === undefined) r.fail(`has an unknown SvcParam key '${keyText}'`, t);
        let raw: string | null = null;
        if (eq >= 0) {
          const after = r.peek();
          raw = eq < t.text.length - 1 ? t.text.slice(eq + 1) : after?.quoted && after.glued ? r.next().text : "";
        }
        const fail = (message: string): never => r.fail(`SvcParam ${keyLabel(key)} ${message}`, t);
        let value: Buffer | null;
        try {
          value = raw === null ? null : decodeText(raw);
        } catch (err) {
          if (err instanceof EntryError) fail(err.message);
          throw err;
        }
        if (params.has(key)) fail("is given twice");
        params.set(key, encodeValue(key, value, fail));
      }
      if (priority === 0 && params.size > 0) r.fail("in AliasMode (priority 0) takes no SvcParams");
      const mandatory = params.get(KEY.mandatory);
      if (mandatory) {
        for (let i = 0; i < mandatory.length; i += 2) {
          const k = mandatory.readUInt16BE(i);
          if (!params.has(k)) r.fail(`lists '${keyLabel(k)}' as mandatory but does not set it`);
        }
      }
      if (params.has(KEY["no-default-alpn"]) && !params.has(KEY.alpn)) r.fail("sets no-default-alpn without alpn");
      w.u16(priority);
      w.bytes(target);
      for (const key of [...params.keys()].sort((a, b) => a - b)) {
        const value = params.get(key) as Buffer;
        if (value.length > 0xffff) r.fail(`SvcParam ${keyLabel(key)} is too long`);
        w.u16(key);
        w.u16(value.length);
        w.bytes(value);
      }
    },
  };
}

export const SVCB_TYPES: readonly [number, RdataSpec][] = [
  [QTYPE.SVCB, svcb("SVCB")],
  [QTYPE.HTTPS, svcb("HTTPS")],
];
