// Reading loosely typed source configurations (parsed YAML or TOML) without casts: each getter
// answers the value when it has the expected type, else undefined. `reportRest` lists the keys of a
// section an importer did not map, so no setting is dropped silently.

import type { Draft } from "./draft.js";

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function obj(v: unknown): Obj {
  return isObj(v) ? v : {};
}

export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

export function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : undefined;
}

export function bool(v: unknown): boolean | undefined {
  return typeof v === "boolean" ? v : undefined;
}

export function strings(v: unknown): string[] {
  if (typeof v === "string") return v.trim() === "" ? [] : [v];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

export function list(v: unknown): Obj[] {
  return Array.isArray(v) ? v.filter(isObj) : [];
}

/** Whether a setting does something: true, a non-zero number, a non-empty string or list, an object with such a value. */
export function active(v: unknown): boolean {
  if (v === true) return true;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "string") return v.trim() !== "";
  if (Array.isArray(v)) return v.length > 0;
  if (isObj(v)) return Object.values(v).some(active);
  return false;
}

/**
 * Every key of `section` that is neither in `handled` nor in `ignored` and is set to something active is
 * reported as unsupported, as `prefix.key: value`.
 */
export function reportRest(draft: Draft, prefix: string, section: Obj, handled: readonly string[], ignored: readonly string[] = []): void {
  for (const [key, value] of Object.entries(section)) {
    if (handled.includes(key) || ignored.includes(key) || !active(value)) continue;
    draft.unsupportedSetting(`${prefix}${key}`, compact(value));
  }
}

/** A value short enough for one header line. */
export function compact(v: unknown): unknown {
  const text = JSON.stringify(v) ?? "";
  return text.length <= 120 ? v : `${text.slice(0, 117)}...`;
}
