// `ecs_handler`: decides which EDNS Client Subnet the upstream sees (the client's, a preset, the client address, or none)
// and keeps ECS out of answers to clients that did not send it.

import { EDNS_OPTION, QCLASS } from "../../dns/constants.js";
import { encodeEcs, subnetFor } from "../../dns/ecs.js";
import { parseIP, unmapIPv4 } from "../../dns/ip.js";
import type { EdnsOption } from "../../dns/message.js";
import type { DnsContext } from "../../engine/context.js";
import { isPromise, runNext, type Step, type StepResult } from "../../engine/types.js";
import { ArgError, argProblems, definePlugin } from "../../registry/types.js";
import { responseOptionCodes } from "./edns-options.js";

interface EcsArgs {
  forward: boolean;
  send: boolean;
  preset?: string;
  mask4: number;
  mask6: number;
}

/** UDP size announced when we add EDNS to a query that had none (the DNS Flag Day 2020 value). */
const ADDED_EDNS_UDP_SIZE = 1232;

/** `ip` or `ip/len`: the address (IPv4-mapped unmapped) and the prefix length, when written. */
function parsePreset(text: string): { ip: Uint8Array; len: number | null } {
  const slash = text.indexOf("/");
  const ipText = slash < 0 ? text : text.slice(0, slash);
  const parsed = parseIP(ipText.trim());
  if (parsed === null) throw new ArgError(`preset '${text}' is not an IP address (write <ip> or <ip>/<len>)`, ["preset"]);
  const ip = unmapIPv4(parsed);
  if (slash < 0) return { ip, len: null };
  const lenText = text.slice(slash + 1).trim();
  const bits = ip.length * 8;
  if (!/^\d{1,3}$/.test(lenText) || Number(lenText) > bits) {
    throw new ArgError(`preset '${text}': prefix length must be 0-${bits} for ${ip.length === 4 ? "IPv4" : "IPv6"}`, ["preset"]);
  }
  return { ip, len: Number(lenText) };
}

/** The ECS option for an address, cut to its family's mask. */
function ecsOption(ip: Uint8Array, mask4: number, mask6: number): EdnsOption {
  return { code: EDNS_OPTION.ECS, data: encodeEcs(subnetFor(ip, ip.length === 4 ? mask4 : mask6)) };
}

/** Removes ECS from the response, and the whole OPT record when the client sent none. */
function after(dns: DnsContext, dropOpt: boolean, step: Step): Step {
  const resp = dns.response;
  if (resp === null) return step;
  const codes = responseOptionCodes(resp);
  if (codes === null || (!dropOpt && !codes.includes(EDNS_OPTION.ECS))) return step;
  const m = resp.edit();
  if (dropOpt) m.edns = null;
  else if (m.edns) m.edns.options = m.edns.options.filter((o) => o.code !== EDNS_OPTION.ECS);
  return step;
}

export const ecsHandler = definePlugin<EcsArgs, "executor">({
  type: "ecs_handler",
  kind: "executor",
  feature: "core",
  summary: "Sets the EDNS Client Subnet sent upstream (forward the client's, a preset, or the client address) and strips it from answers.",
  schema: {
    type: "object",
    additionalProperties: false,
    properties: {
      forward: { type: "boolean", default: false },
      send: { type: "boolean", default: false },
      preset: { type: "string", minLength: 1 },
      mask4: { type: "integer", minimum: 0, maximum: 32, default: 24 },
      mask6: { type: "integer", minimum: 0, maximum: 128, default: 48 },
    },
  },
  shorthand: (raw) => raw ?? {},
  quickSetup: (param) => (param.length === 0 ? {} : { preset: param }),
  check: (args) => (args.preset === undefined ? [] : argProblems(() => parsePreset(args.preset as string))),
  create(args) {
    const { forward, send, mask4, mask6 } = args;
    let preset: EdnsOption | null = null;
    if (args.preset !== undefined) {
      const p = parsePreset(args.preset);
      preset = { code: EDNS_OPTION.ECS, data: encodeEcs(subnetFor(p.ip, p.len ?? (p.ip.length === 4 ? mask4 : mask6))) };
    }

    const ownOption = (dns: DnsContext): EdnsOption | null => {
      if (preset !== null) return preset;
      if (!send) return null;
      const ip = dns.clientAddress;
      return ip === null ? null : ecsOption(ip, mask4, mask6);
    };

    return {
      continuation: true,
      execute(dns, next) {
        const q = dns.query;
        if (q.questions.length === 0 || q.questions[0].class !== QCLASS.IN) return runNext(dns, next);
        const edns = q.edns;
        const clientHasEcs = edns !== null && edns.options.some((o) => o.code === EDNS_OPTION.ECS);
        // A trusted client's subnet goes upstream as sent, and the upstream's answer to it comes back.
        if (clientHasEcs && forward) return runNext(dns, next);
        const own = ownOption(dns);
        if (!clientHasEcs && own === null) {
          const r = runNext(dns, next);
          return isPromise(r) ? r.then((step) => after(dns, false, step)) : after(dns, false, r);
        }
        // Replace, not mutate: the options list may be shared with a copy of this context.
        const options = edns === null ? [] : edns.options.filter((o) => o.code !== EDNS_OPTION.ECS);
        if (own !== null) options.push(own);
        q.edns = edns === null ? { udpSize: ADDED_EDNS_UDP_SIZE, extRcode: 0, version: 0, flags: 0, options } : { ...edns, options };
        dns.queryChanged();
        // Rules before this one see the request as the client sent it again (and a SERVFAIL or an
        // empty reply built from it gets no OPT the client did not ask for).
        const restore = (): void => {
          q.edns = edns;
          dns.queryChanged();
        };
        let r: StepResult;
        try {
          r = runNext(dns, next);
        } catch (err) {
          restore();
          throw err;
        }
        const finish = (step: Step): Step => {
          restore();
          return after(dns, edns === null, step);
        };
        if (!isPromise(r)) return finish(r);
        return r.then(finish, (err: unknown) => {
          restore();
          throw err;
        });
      },
    };
  },
});
