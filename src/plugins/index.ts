// Every plugin type Sluice knows. Adding a type: one definition file plus one line here.

import type { AnyDefinition } from "../registry/types.js";
import { matcherControl } from "./matchers/control.js";
import { providerControl } from "./providers/control.js";
import { arbitrary } from "./executors/arbitrary.js";
import { blackHole } from "./executors/black-hole.js";
import { cache } from "./executors/cache/index.js";
import { ddr } from "./executors/ddr.js";
import { forward } from "./executors/forward/index.js";
import { hosts } from "./executors/hosts.js";
import { sequence } from "./executors/sequence.js";
import { sleep } from "./executors/sleep.js";
import { dropResp } from "./executors/drop-resp.js";
import { ecsHandler } from "./executors/ecs-handler.js";
import { forwardEdns0opt } from "./executors/forward-edns0opt.js";
import { preferIpv4, preferIpv6 } from "./executors/prefer-ip.js";
import { ipSelector } from "./executors/ip-selector/index.js";
import { redirect } from "./executors/redirect.js";
import { ttl } from "./executors/ttl.js";
import { debugPrint } from "./executors/debug-print.js";
import { fallback } from "./executors/fallback.js";
import { metricsCollector } from "./executors/metrics-collector.js";
import { querySummary } from "./executors/query-summary.js";
import { queryRecorder } from "./executors/query-recorder/index.js";
import { reloadProvider } from "./executors/reload-provider.js";
import { reload } from "./executors/reload.js";
import { cron } from "./executors/cron/index.js";
import { download } from "./executors/download/index.js";
import { reverseLookup } from "./executors/reverse-lookup.js";
import { httpRequest } from "./executors/http-request/index.js";
import { script } from "./executors/script/index.js";
import { learnDomain } from "./executors/learn-domain.js";
import { rosAddressList } from "./executors/ros-address-list/index.js";
import { ipset } from "./executors/sets/ipset.js";
import { nftset } from "./executors/sets/nftset.js";
import { anyMatch } from "./matchers/any-match.js";
import { clientIpMatcher } from "./matchers/client-ip.js";
import { clientMatcher } from "./matchers/client.js";
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
import { envMatcher } from "./matchers/env.js";
import { hasWantedAnsMatcher } from "./matchers/has-wanted-ans.js";
import { questionMatcher } from "./matchers/question.js";
import { randomMatcher } from "./matchers/random.js";
import { rateLimiterMatcher } from "./matchers/rate-limiter.js";
import { scheduleMatcher } from "./matchers/schedule.js";
import { stringExpMatcher } from "./matchers/string-exp.js";
import { adguardRule } from "./providers/adguard-rule.js";
import { domainSet } from "./providers/domain-set.js";
import { dynamicDomainSet } from "./providers/dynamic-domain-set/index.js";
import { clientsProvider } from "./providers/clients/index.js";
import { geoip } from "./providers/geoip.js";
import { geosite } from "./providers/geosite.js";
import { ipSet } from "./providers/ip-set.js";
import { httpServer } from "./servers/http-server.js";
import { tcpServer } from "./servers/tcp-server.js";
import { udpServer } from "./servers/udp-server.js";

/** Every matcher and provider has its kind's control plane (mode; reload) unless it declares its own. */
function withKindControl(def: AnyDefinition): AnyDefinition {
  if (def.control) return def;
  if (def.kind === "matcher") return { ...def, control: matcherControl };
  if (def.kind === "provider") return { ...def, control: providerControl };
  return def;
}

export const PLUGIN_DEFINITIONS: readonly AnyDefinition[] = [
  // servers
  udpServer,
  tcpServer,
  httpServer,
  // executors
  arbitrary,
  sequence,
  forward,
  blackHole,
  ddr,
  sleep,
  hosts,
  cache,
  ttl,
  dropResp,
  redirect,
  preferIpv4,
  preferIpv6,
  ipSelector,
  ecsHandler,
  forwardEdns0opt,
  fallback,
  reverseLookup,
  learnDomain,
  metricsCollector,
  querySummary,
  queryRecorder,
  debugPrint,
  reloadProvider,
  reload,
  cron,
  download,
  httpRequest,
  script,
  rosAddressList,
  ipset,
  nftset,
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
  clientMatcher,
  respIpMatcher,
  ptrIpMatcher,
  hasWantedAnsMatcher,
  envMatcher,
  randomMatcher,
  rateLimiterMatcher,
  scheduleMatcher,
  stringExpMatcher,
  questionMatcher,
  // providers
  domainSet,
  dynamicDomainSet,
  clientsProvider,
  ipSet,
  geosite,
  geoip,
  adguardRule,
].map(withKindControl);
