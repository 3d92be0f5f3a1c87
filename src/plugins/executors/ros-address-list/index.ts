// `ros_address_list`: puts the addresses of DNS answers into MikroTik RouterOS firewall address lists
// through the router's REST API, so the router's mangle and routing rules can act on the destinations
// of chosen names. A continuation executor: after the rest of the sequence, a NOERROR answer to an A
// or AAAA question gives its addresses (TTL clamped, or fixed) to the plugin's manager through a bounded
// intake; the answer itself is never changed. The manager is the ros:<tag> actor
// (machines/ros-address-list.machine.ts; work in manager.ts). See docs/plugins.md#ros_address_list.

import { readFile } from "node:fs/promises";
import { QTYPE } from "../../../dns/constants.js";
import type { DnsContext } from "../../../engine/context.js";
import { isPromise, runNext, type Continuation, type Step, type StepResult } from "../../../engine/types.js";
import type { Cell, MetricsHub } from "../../../observability/metrics.js";
import { ArgError, definePlugin, type ControlHandle, type ExecutorPlugin } from "../../../registry/types.js";
import { checkRosArgs, listFor, loadPersistent, ms, restBase, rosSchema, type RosArgs } from "./args.js";
import { RosClient } from "./client.js";
import { rosControl } from "./control.js";
import { answerAddresses, Intake, type Observation } from "./intake.js";
import { RosManager, type ManagerCounters } from "./manager.js";
import { claim, claimKey, Ownership } from "./ownership.js";

interface RosCounters extends ManagerCounters {
  observed: Cell;
  dropped: Cell;
  depth: Cell;
  retryDepth: Cell;
  waitTimeout: Cell;
}

function counters(m: MetricsHub, tag: string): RosCounters {
  const labels = { plugin_tag: tag };
  const names = ["plugin_tag"];
  const c = (name: string, help: string): Cell => m.counter(`ros_address_list_${name}`, `ros_address_list: ${help}`, names)(labels);
  const g = (name: string, help: string): Cell => m.gauge(`ros_address_list_${name}`, `ros_address_list: ${help}`, names)(labels);
  return {
    observed: c("observe_total", "addresses taken from answers"),
    dropped: c("dropped_total", "addresses dropped because the intake or the retry backlog was full"),
    added: c("added_total", "rows added to the router"),
    refreshed: c("refreshed_total", "row timeouts extended"),
    removed: c("removed_total", "rows removed (persistent rows no longer configured, cleanup at shutdown)"),
    retried: c("retry_total", "addresses put back for another attempt after a transient failure"),
    failed: c("failed_total", "addresses given up (a refused call, or retries used up)"),
    error: c("sync_error_total", "failed calls to the router for an address"),
    timeout: c("sync_timeout_total", "calls to the router that timed out"),
    waitTimeout: c("wait_timeout_total", "queries (async: false) that went on at wait_timeout before their addresses were synced"),
    depth: g("queue_depth", "addresses waiting in the intake"),
    retryDepth: g("retry_depth", "addresses waiting for another attempt"),
    entries: g("entries", "rows the plugin knows in the router's lists (its own and others' covering a persistent address)"),
  };
}

export class RosAddressList implements ExecutorPlugin {
  readonly continuation = true;
  /** Aborted by destroy: the call in flight stops, so the manager can stop (and clean up) at once. */
  readonly gone = new AbortController();
  private readonly waitMs: number;

  constructor(
    readonly tag: string,
    readonly args: RosArgs,
    readonly router: string,
    readonly client: RosClient,
    readonly ownership: Ownership,
    readonly manager: RosManager,
    readonly intake: Intake,
    readonly backlog: Intake,
    readonly c: RosCounters,
    private readonly shift: { readonly ms: number },
    private readonly self: ControlHandle,
    private readonly unclaim: () => void,
  ) {
    this.waitMs = ms(args.wait_timeout);
  }

  execute(ctx: DnsContext, next: Continuation | null): StepResult {
    const res = runNext(ctx, next);
    return isPromise(res) ? res.then((step) => this.after(ctx, step)) : this.after(ctx, res);
  }

  /** Hands the answer's addresses to the manager; with async false, waits (at most wait_timeout) for their first attempt. */
  private after(ctx: DnsContext, step: Step): StepResult {
    const qtype = ctx.qtype;
    if (qtype !== QTYPE.A && qtype !== QTYPE.AAAA) return step;
    const a = this.args;
    const found = answerAddresses(ctx.response, a.address_list4 !== undefined, a.address_list6 !== undefined);
    if (found === null) return step;
    const now = ctx.startedAt + this.shift.ms;
    const domain = ctx.qname.endsWith(".") ? ctx.qname.slice(0, -1) : ctx.qname;
    let waiting = 0;
    let wake: (() => void) | null = null;
    const waiter = a.async ? null : () => {
      if (--waiting === 0) wake?.();
    };
    for (const [key, f] of found) {
      this.c.observed.value++;
      const ttl = a.fixed_ttl !== undefined ? (a.fixed_ttl === 0 ? null : a.fixed_ttl) : Math.max(1, Math.min(a.max_ttl, Math.max(a.min_ttl, f.ttl)));
      if (!this.manager.needs(key, ttl, now)) continue;
      const obs: Observation = { family: f.family, address: f.address, ttl, domain };
      if (this.intake.offer(key, obs, waiter) && waiter) waiting++;
    }
    if (waiting === 0) return step;
    return new Promise<Step>((resolve) => {
      const timer = setTimeout(() => {
        this.c.waitTimeout.value++;
        wake = null;
        resolve(step);
      }, this.waitMs);
      wake = () => {
        clearTimeout(timer);
        resolve(step);
      };
    });
  }

  async destroy(): Promise<void> {
    this.gone.abort();
    // The manager ends its work, removes this plugin's rows (cleanup_on_shutdown) and answers.
    await this.self.ask({ type: "ROS.STOP" }).catch(() => undefined);
    this.intake.clear();
    this.backlog.clear();
    this.unclaim();
    this.client.close();
  }
}

export const rosAddressList = definePlugin<RosArgs, "executor", RosAddressList>({
  type: "ros_address_list",
  kind: "executor",
  feature: "mikrotik",
  summary: "Adds the addresses of NOERROR A/AAAA answers to MikroTik RouterOS address lists (REST API), in the background.",
  dataFiles: (args) => (args.persistent?.files ?? []).map((path) => ({ path })),
  schema: rosSchema,
  check: (args) => checkRosArgs(args),
  async create(args, ctx) {
    if (/[;=]/.test(ctx.tag)) throw new ArgError(`the tag '${ctx.tag}' must not contain ';' or '=' (it is written into the rows' comments)`);
    const base = restBase(args.address);
    const caPath = args.ca ?? args.tls?.ca;
    let ca: Buffer | null = null;
    if (caPath !== undefined) {
      try {
        ca = await readFile(ctx.resolvePath(caPath));
      } catch (err) {
        throw new ArgError(`cannot read the CA file: ${(err as Error).message}`, args.ca !== undefined ? ["ca"] : ["tls", "ca"]);
      }
    }
    const persistent = await loadPersistent(args, (p) => ctx.resolvePath(p));
    const c = counters(ctx.services.metrics, ctx.tag);
    const idle = Math.max(args.send_timeout ?? 0, args.receive_timeout ?? 0);
    const client = new RosClient({
      base,
      username: args.username,
      password: args.password,
      ca,
      insecure: args.insecure_skip_verify || args.tls?.insecure === true,
      serverName: args.tls?.server_name,
      timeoutMs: ms(args.timeout),
      ...(args.connect_timeout === undefined ? {} : { connectTimeoutMs: args.connect_timeout * 1000 }),
      ...(idle === 0 ? {} : { idleTimeoutMs: idle * 1000 }),
    });
    const ownership = new Ownership(args.comment_prefix, ctx.tag);
    const intake = new Intake(args.queue_capacity, { dropped: c.dropped, depth: c.depth });
    const backlog = new Intake(args.queue_capacity, { dropped: c.dropped, depth: c.retryDepth });
    const shift = ctx.services.clockShift;
    const lists = { ...(args.address_list4 === undefined ? {} : { 4: args.address_list4 }), ...(args.address_list6 === undefined ? {} : { 6: args.address_list6 }) };
    const manager = new RosManager({
      client,
      ownership,
      lists,
      persistent,
      intake,
      backlog,
      batchSize: args.batch_size,
      retries: args.retries,
      counters: c,
      log: ctx.log,
      clock: () => performance.now() + shift.ms,
    });
    const router = `${base.origin}${base.pathname}`;
    const families = ([4, 6] as const).filter((f) => listFor(args, f) !== undefined);
    const unclaim = claim(
      families.map((f) => claimKey(router, ownership, f, listFor(args, f) as string)),
      manager,
    );
    return new RosAddressList(ctx.tag, args, router, client, ownership, manager, intake, backlog, c, shift, ctx.control(ctx.tag), unclaim);
  },
  control: rosControl,
});

