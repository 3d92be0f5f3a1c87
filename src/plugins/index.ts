// Every plugin type Sluice knows. Adding a type: one definition file plus one line here.

import type { AnyDefinition } from "../registry/types.js";
import { arbitrary } from "./executors/arbitrary.js";
import { blackHole } from "./executors/black-hole.js";
import { forward } from "./executors/forward.js";
import { hosts } from "./executors/hosts.js";
import { sequence } from "./executors/sequence.js";
import { sleep } from "./executors/sleep.js";
import { anyMatch } from "./matchers/any-match.js";
import { clientIpMatcher } from "./matchers/client-ip.js";
import { cnameMatcher } from "./matchers/cname.js";
import { falseMatcher, trueMatcher } from "./matchers/constant.js";
import { hasRespMatcher } from "./matchers/has-resp.js";
import { markMatcher } from "./matchers/mark.js";
import { ptrIpMatcher } from "./matchers/ptr-ip.js";
import { qclassMatcher } from "./matchers/qclass.js";
import { qnameMatcher } from "./matchers/qname.js";
import { qtypeMatcher } from "./matchers/qtype.js";
import { rcodeMatcher } from "./matchers/rcode.js";
import { respIpMatcher } from "./matchers/resp-ip.js";
import { domainSet } from "./providers/domain-set.js";
import { ipSet } from "./providers/ip-set.js";
import { tcpServer } from "./servers/tcp-server.js";
import { udpServer } from "./servers/udp-server.js";

export const PLUGIN_DEFINITIONS: readonly AnyDefinition[] = [
  // servers
  udpServer,
  tcpServer,
  // executors
  arbitrary,
  sequence,
  forward,
  blackHole,
  sleep,
  hosts,
  // matchers
  trueMatcher,
  falseMatcher,
  qtypeMatcher,
  qclassMatcher,
  rcodeMatcher,
  hasRespMatcher,
  markMatcher,
  anyMatch,
  qnameMatcher,
  cnameMatcher,
  clientIpMatcher,
  respIpMatcher,
  ptrIpMatcher,
  // providers
  domainSet,
  ipSet,
];
