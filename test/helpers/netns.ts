// A network namespace of the test's own (`ip netns add`), so the kernel sets the ipset and nftset
// tests write are theirs alone and vanish with it. The test's sockets stay where they are: the tools
// run inside it (`ip netns exec <name> ipset …`, which a plugin's `command` can say), and so can a
// whole program. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), which the suite has where it runs.

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { requireTool } from "./tools.js";

const run = promisify(execFile);

export interface Netns {
  name: string;
  /** The argv prefix that runs a program inside the namespace (`ip netns exec <name>`). */
  prefix: string[];
  /** Paths of the tools. */
  ipset: string;
  nft: string;
  /** Runs `argv` inside the namespace; its stdout (rejects with stderr on failure). */
  exec(argv: string[]): Promise<string>;
  remove(): Promise<void>;
}

export async function makeNetns(): Promise<Netns> {
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    throw new Error("the ipset/nftset tests make a network namespace and write kernel sets: run them as root (CI and the dev container do)");
  }
  const ip = requireTool("ip");
  const ipset = requireTool("ipset");
  const nft = requireTool("nft");
  const name = `sluice-${process.pid}-${randomBytes(4).toString("hex")}`;
  await run(ip, ["netns", "add", name]);
  const prefix = [ip, "netns", "exec", name];
  const exec = async (argv: string[]): Promise<string> => {
    try {
      return (await run(prefix[0], [...prefix.slice(1), ...argv], { timeout: 10_000 })).stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${argv.join(" ")}: ${e.stderr?.trim() || e.message}`, { cause: err });
    }
  };
  await exec([ip, "link", "set", "lo", "up"]);
  return {
    name,
    prefix,
    ipset,
    nft,
    exec,
    remove: async () => {
      await run(ip, ["netns", "del", name]);
    },
  };
}

/**
 * Runs `fn` with a wrapper named `tool` first on PATH that runs the real one inside the namespace: a
 * plugin made meanwhile without `command` (a quick setup) finds it, as a server finds /usr/sbin/ipset.
 */
export async function withToolOnPath<T>(ns: Netns, tool: "ipset" | "nft", fn: () => Promise<T>): Promise<T> {
  const bin = mkdtempSync(join(tmpdir(), `${tool}-path-`));
  writeFileSync(join(bin, tool), `#!/bin/sh\nexec ${ns.prefix.join(" ")} ${tool === "ipset" ? ns.ipset : ns.nft} "$@"\n`, { mode: 0o755 });
  const path = process.env.PATH;
  process.env.PATH = `${bin}:${path ?? ""}`;
  try {
    return await fn();
  } finally {
    process.env.PATH = path;
    rmSync(bin, { recursive: true, force: true });
  }
}

/** `ipset save <set>` as prefix → timeout left (null: the entry has none). */
export async function ipsetEntries(ns: Netns, set: string): Promise<Map<string, number | null>> {
  const out = new Map<string, number | null>();
  for (const line of (await ns.exec([ns.ipset, "save", set])).split("\n")) {
    const m = /^add \S+ (\S+)(?: timeout (\d+))?/.exec(line);
    if (m) out.set(m[1], m[2] === undefined ? null : Number(m[2]));
  }
  return out;
}

interface NftElem {
  elem?: { val: unknown; timeout?: number; expires?: number };
  prefix?: { addr: string; len: number };
}

/** `nft -j list set` as prefix → seconds until it expires (null: no timeout). */
export async function nftEntries(ns: Netns, family: string, table: string, set: string): Promise<Map<string, number | null>> {
  const doc = JSON.parse(await ns.exec([ns.nft, "-j", "list", "set", family, table, set])) as { nftables: { set?: { elem?: (NftElem | string)[] } }[] };
  const out = new Map<string, number | null>();
  const text = (v: unknown): string => {
    if (typeof v === "string") return v;
    const p = (v as NftElem).prefix;
    return p ? `${p.addr}/${p.len}` : JSON.stringify(v);
  };
  for (const item of doc.nftables) {
    for (const e of item.set?.elem ?? []) {
      if (typeof e === "object" && e.elem) out.set(text(e.elem.val), e.elem.expires ?? null);
      else out.set(text(e), null);
    }
  }
  return out;
}
