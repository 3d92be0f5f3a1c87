// Every plugin type Sluice knows. Adding a type: one definition file plus one line here.

import type { AnyDefinition } from "../registry/types.js";
import { sequence } from "./executors/sequence.js";
import { tcpServer } from "./servers/tcp-server.js";
import { udpServer } from "./servers/udp-server.js";

export const PLUGIN_DEFINITIONS: readonly AnyDefinition[] = [
  // servers
  udpServer,
  tcpServer,
  // executors
  sequence,
  // matchers
  // providers
];
