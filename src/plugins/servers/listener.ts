// What every shared listener has: the handler of the owner that started last, and its owners
// (runtimes); the pool (src/registry/listener-pool.ts) closes it when the last owner lets go.

import type { SharedListener } from "../../registry/listener-pool.js";

export abstract class Listener<H> implements SharedListener {
  handler: H | null = null;
  readonly owners = new Set<object>();
  constructor(readonly key: string) {}
  abstract address(): { address: string; port: number };
  abstract maxConns(): number;
  abstract close(): Promise<void>;
}
