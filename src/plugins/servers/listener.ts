// What every shared listener has: the handler of the owner that started last, and its owners
// (runtimes); the pool in listeners.ts closes it when the last owner lets go.

export abstract class Listener<H> {
  handler: H | null = null;
  readonly owners = new Set<object>();
  constructor(readonly key: string) {}
  abstract address(): { address: string; port: number };
  abstract close(): Promise<void>;
}
