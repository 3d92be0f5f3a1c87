// Basic Auth for /api/*: "Basic " + standard Base64 of "user:password", compared in constant time.
// The scheme name is case-insensitive and may be followed by several spaces (RFC 7235 §2.1).

import { createHash, timingSafeEqual } from "node:crypto";
import type { ApiConfig } from "../config/schema.js";

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const CREDENTIALS = /^basic +([^ ]+) *$/i;

export class BasicAuth {
  private readonly expected: Buffer;

  constructor(username: string, password: string) {
    this.expected = createHash("sha256").update(`${username}:${password}`, "utf8").digest();
  }

  static from(config: ApiConfig): BasicAuth | null {
    return config.auth ? new BasicAuth(config.auth.username, config.auth.password) : null;
  }

  /** True when the Authorization header carries exactly the configured pair. */
  check(header: string | undefined): boolean {
    const encoded = header === undefined ? undefined : CREDENTIALS.exec(header)?.[1];
    if (encoded === undefined || encoded.length % 4 !== 0 || !BASE64.test(encoded)) return false;
    const decoded = Buffer.from(encoded, "base64");
    // Hashing both sides gives equal lengths, so the comparison time says nothing about the secret.
    return timingSafeEqual(createHash("sha256").update(decoded).digest(), this.expected);
  }
}
