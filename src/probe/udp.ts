// The UDP probe: one query from a connected socket (so an ICMP "port unreachable" comes back as a
// refusal instead of a silence), timed from send to answer.

import dgram from "node:dgram";
import { acceptAnswer, packetWithId, randomId } from "../engine/upstream/exchange.js";
import type { DnsResponse } from "../dns/response.js";
import { deadline, emptyResult, failureText, noteAnswer, shownMs, since, type ProbeResult, type ProbeSettings, type ProbeTarget } from "./result.js";

export async function probeUdp(target: ProbeTarget, ip: string, settings: ProbeSettings): Promise<ProbeResult> {
  const family = ip.includes(":") ? 6 : 4;
  const result = emptyResult(target, family === 6 ? `[${ip}]:${target.port}` : `${ip}:${target.port}`);
  const socket = dgram.createSocket(family === 6 ? "udp6" : "udp4");
  const id = randomId();
  const limit = deadline(settings.timeoutMs, `no answer within ${shownMs(settings.timeoutMs)}`);
  try {
    let started = 0;
    const answer = new Promise<{ resp: DnsResponse; ms: number }>((resolve, reject) => {
      socket.on("message", (msg) => {
        const resp = acceptAnswer(msg, settings.query, id);
        if (resp) resolve({ resp, ms: since(started) });
      });
      socket.on("error", reject);
      socket.connect(target.port, ip, () => {
        started = performance.now();
        socket.send(packetWithId(settings.query, id, false));
      });
    });
    const got = await Promise.race([answer, limit.expired]);
    noteAnswer(result, got.resp, got.ms);
  } catch (err) {
    const text = failureText(err);
    result.error = text === "connection refused" ? "connection refused (ICMP port unreachable)" : text;
  } finally {
    limit.cancel();
    socket.close();
  }
  return result;
}
