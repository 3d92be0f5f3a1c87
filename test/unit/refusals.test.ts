// Every refusal the API can meet has an API code. The events API routes send to actors are read from
// the route code itself (the literal `type` of each ask / sendIfAccepted / controlApp call), and every
// machine in machines/ is walked: wherever an API event has a transition, each guard that can keep it
// from being taken must be named (no inline guard) and mapped in GUARD_REFUSALS, and every state the
// actor can rest in must have a transition for it (a state without one would refuse it unnamed).
// Guard names are unique across machines, so one name means one rule and one code.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import type { AnyStateMachine } from "xstate";
import { GUARD_REFUSALS } from "../../src/api/guards.js";

const root = join(import.meta.dirname, "..", "..");

function files(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && keep(e.name))
    .map((e) => join(e.parentPath, e.name));
}

/** Event types sent by API route code: the literal `type` of each ask/sendIfAccepted/controlApp call, or of an `…Event` built to be sent. */
function apiEvents(): Map<string, string> {
  const sources = [
    ...files("src/api", (n) => n.endsWith(".ts")),
    ...files("src/plugins", (n) => n === "control.ts" || n === "routes.ts"),
    join(root, "actors", "app.actor.ts"),
  ];
  const found = new Map<string, string>();
  const patterns = [/\b(?:ask|sendIfAccepted|controlApp)\((?:[^;]*?)\{\s*type:\s*"([A-Z][A-Z_.]*)"/g, /\w*Event\s*=\s*\{\s*type:\s*"([A-Z][A-Z_.]*)"/g];
  for (const file of sources) {
    const text = readFileSync(file, "utf8");
    for (const re of patterns) for (const m of text.matchAll(re)) found.set(m[1], file.slice(root.length + 1));
  }
  return found;
}

async function machines(): Promise<Map<string, AnyStateMachine>> {
  const out = new Map<string, AnyStateMachine>();
  for (const file of readdirSync(join(root, "machines")).filter((f) => f.endsWith(".machine.ts"))) {
    const mod = (await import(join(root, "machines", file))) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      if (typeof value === "object" && value !== null && "root" in value && "implementations" in value) out.set(`${file}:${name}`, value as AnyStateMachine);
    }
  }
  return out;
}

type Node = AnyStateMachine["root"];
type GuardRef = unknown;

const nodesOf = (node: Node): Node[] => [node, ...Object.values(node.states).flatMap((child) => nodesOf(child))];

/** Named guards under a transition's guard (operands of and/or/not included); "inline" for an unnamed one. */
function guardNames(guard: GuardRef): string[] {
  if (guard === undefined) return [];
  if (typeof guard === "string") return [guard];
  if (typeof guard === "object" && guard !== null && "type" in guard) return [String((guard).type)];
  const operands = (guard as { guards?: GuardRef[] }).guards;
  if (Array.isArray(operands)) return operands.flatMap(guardNames);
  return ["inline"];
}

/** The event is handled in `leaf`: by it, an ancestor, or (in a parallel state) the root of a sibling region. */
function handledIn(leaf: Node, event: string): boolean {
  for (let n: Node | undefined = leaf; n; n = n.parent) {
    if (n.transitions.has(event)) return true;
    const parent = n.parent;
    if (parent?.type === "parallel" && Object.values(parent.states).some((region) => region.transitions.has(event))) return true;
  }
  return false;
}

test("the API's events are read from the route code (the scan finds the ones known to exist)", () => {
  const events = apiEvents();
  for (const e of ["SAVE", "VALIDATE", "RELOAD.REQUEST", "SHUTDOWN", "RESTART", "UPGRADE.APPLY", "CACHE.FLUSH", "CACHE.LOAD", "CRON.RUN", "DOWNLOAD.RUN", "PROVIDER.RELOAD", "RECORDS.CLEAR", "RECORDS.READ", "MATCHER.SET_MODE"]) {
    expect(events.has(e), `${e} not found in the API's code`).toBe(true);
  }
});

test("every guard that can refuse an API event is named, unique to its machine and mapped to an API code", async () => {
  const events = apiEvents();
  const problems: string[] = [];
  const owners = new Map<string, string>();
  for (const [name, machine] of await machines()) {
    const nodes = nodesOf(machine.root);
    // One guard name, one machine (a name shared across machines would give two rules one code).
    const declared = Object.keys(machine.implementations.guards);
    for (const g of declared) {
      const owner = owners.get(g);
      if (owner !== undefined && owner !== name.split(":")[0]) problems.push(`guard ${g} is declared by ${owner} and ${name}`);
      owners.set(g, name.split(":")[0]);
    }
    for (const event of events.keys()) {
      const handlers = nodes.filter((n) => n.transitions.has(event));
      if (handlers.length === 0) continue;
      for (const node of handlers) {
        const transitions = node.transitions.get(event) ?? [];
        // A last transition without a guard takes the event whatever the others' guards say.
        const refusable = transitions.at(-1)?.guard !== undefined;
        if (!refusable) continue;
        // A refusal is named by the first transition's failing guard (actors/ask.ts refusingGuard); the
        // guards of later alternatives only choose among ways to take the event.
        for (const t of transitions.slice(0, 1)) {
          for (const g of guardNames(t.guard)) {
            if (g === "inline") problems.push(`${name}: ${event} in ${node.id} has an unnamed guard`);
            else if (!Object.hasOwn(GUARD_REFUSALS, g)) problems.push(`${name}: ${event} in ${node.id} can be refused by ${g}, which has no API code`);
          }
        }
      }
      for (const leaf of nodes.filter((n) => n.type === "atomic")) {
        if (!handledIn(leaf, event)) problems.push(`${name}: ${event} (sent by ${events.get(event)}) has no transition in state ${leaf.id}`);
      }
    }
  }
  expect(problems).toEqual([]);
});

test("every mapped guard exists in some machine (no code for a refusal that cannot happen)", async () => {
  const declared = new Set([...(await machines()).values()].flatMap((m) => Object.keys(m.implementations.guards)));
  expect(Object.keys(GUARD_REFUSALS).filter((g) => !declared.has(g))).toEqual([]);
});
