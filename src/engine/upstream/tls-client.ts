// The client side of TLS towards a DoT or DoH upstream: SNI and certificate checks against the
// configured host name (also when `dial_addr` connects elsewhere), the system trust store (Node's
// store plus NODE_EXTRA_CA_CERTS) or the upstream's own `ca`, and TLS session resumption (the
// last ticket the upstream gave is offered on the next connection).

import { isIP } from "node:net";
import type { Duplex } from "node:stream";
import tls from "node:tls";

export interface TlsClientSetup {
  /** Host the certificate must name: the address's host name or IP. */
  readonly verifyName: string;
  /** PEM CA certificates replacing the trust store, or undefined for the store. */
  readonly ca: Buffer | undefined;
  readonly insecureSkipVerify: boolean;
  /** Latest session ticket, shared by every connection of one upstream. */
  session: Buffer | null;
  /** Called once per completed handshake (metrics). */
  readonly onHandshake: ((resumed: boolean) => void) | null;
}

export function tlsClientSetup(verifyName: string, ca: Buffer | undefined, insecureSkipVerify: boolean, onHandshake: ((resumed: boolean) => void) | null = null): TlsClientSetup {
  return { verifyName, ca, insecureSkipVerify, session: null, onHandshake };
}

/** Opens a TLS connection to `ip:port` for `setup`, offering `alpn`; over `over` when given (a proxied or bound connection). */
export function connectTls(setup: TlsClientSetup, ip: string, port: number, alpn: string[], over?: Duplex): tls.TLSSocket {
  const name = setup.verifyName;
  const socket = tls.connect({
    ...(over ? { socket: over } : { host: ip, port }),
    // RFC 6066: SNI carries host names only.
    servername: isIP(name) === 0 ? name : undefined,
    ALPNProtocols: alpn,
    ca: setup.ca,
    rejectUnauthorized: !setup.insecureSkipVerify,
    checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert),
    session: setup.session ?? undefined,
    minVersion: "TLSv1.2",
  });
  socket.on("session", (ticket: Buffer) => {
    setup.session = ticket;
  });
  if (setup.onHandshake) {
    const report = setup.onHandshake;
    socket.once("secureConnect", () => report(socket.isSessionReused()));
  }
  return socket;
}

/** The reason a TLS connection failed, in words an operator can act on. */
export function tlsFailure(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") return `certificate does not match: ${err.message}`;
  if (code !== undefined && /CERT|SELF_SIGNED|UNABLE_TO_|VERIFY/.test(code)) return `certificate not trusted (${code}): ${err.message}`;
  return err.message;
}
