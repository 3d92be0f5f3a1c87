// Public surface of the zone-file parser.

export { ZoneError } from "./errors.js";
export { DEFAULT_TTL, MAX_INCLUDE_DEPTH, parseZone, parseZoneFile, type ZoneOptions } from "./parser.js";
export { MAX_GENERATED } from "./generate.js";
export { TEXT_FORM_TYPES } from "./rdata.js";
