// Readiness for systemd (Type=notify): once every listener serves, `systemd-notify --ready` tells
// the service manager over $NOTIFY_SOCKET. Node has no unix datagram sockets, so the message is
// sent by systemd's own tool, a child process; the unit says NotifyAccess=all for it. Without
// NOTIFY_SOCKET (not started by systemd, or Type=simple) nothing runs. The hot path never waits:
// the child runs on its own and a failure is only logged.

import { execFile } from "node:child_process";

export interface NotifyLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Sends READY=1 (and a status line) when systemd asked for notifications; resolves once sent or failed. */
export function notifyReady(status: string, log: NotifyLog, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  if (!env.NOTIFY_SOCKET) return Promise.resolve();
  return new Promise((resolve) => {
    execFile("systemd-notify", ["--ready", `--status=${status}`], { env, timeout: 10_000 }, (err, _stdout, stderr) => {
      if (err) log.warn({ target: "app", err: stderr.trim() || err.message }, "systemd-notify --ready failed: systemd was not told the service is ready");
      else log.info({ target: "app" }, "systemd told the service is ready");
      resolve();
    });
  });
}
