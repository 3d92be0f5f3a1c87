// The shapes of the API's answers, derived from the response schemas the routes serialise with
// (and /api/openapi.json shows): the server's own schema files, read with `import type` (nothing of
// the server is bundled), so a schema change that breaks a page fails `npm run typecheck`. Only
// schema files are imported here: they import nothing that needs Node, which the dashboard's
// typecheck does not have. (It lives with the dashboard: the API's and the plugins' schemas are
// two layers that never import each other.)

import type { FromSchema } from "../../src/config/schema-type.js";
import type * as api from "../../src/api/schemas.js";
import type * as cache from "../../src/plugins/executors/cache/schemas.js";
import type * as cron from "../../src/plugins/executors/cron/schemas.js";
import type * as download from "../../src/plugins/executors/download/schemas.js";
import type * as recorder from "../../src/plugins/executors/query-recorder/schemas.js";
import type * as matcher from "../../src/plugins/matchers/schemas.js";
import type * as clients from "../../src/plugins/providers/clients/schemas.js";
import type * as provider from "../../src/plugins/providers/schemas.js";
import type * as dynset from "../../src/plugins/providers/dynamic-domain-set/schemas.js";

// Health, build, control, actors, plugins.
export type Health = FromSchema<typeof api.healthSchema>;
export type BuildAnswer = FromSchema<typeof api.buildSchema>;
export type BuildRecord = BuildAnswer["build"];
export type SystemRecord = FromSchema<typeof api.systemSchema>;
export type ReloadStatus = FromSchema<typeof api.reloadSchema>;
export type ActorInfo = FromSchema<typeof api.actorSchema>;
/** Data of an `actor` frame of GET /api/actors/stream. */
export type ActorFrame = Omit<ActorInfo, "parent">;
export type PluginsAnswer = FromSchema<typeof api.pluginsSchema>;
export type PluginInfo = PluginsAnswer["plugins"][number];

// Configuration.
export type ConfigFile = FromSchema<typeof api.configFileSchema>;
export type ConfigSaved = FromSchema<typeof api.configSavedSchema>;
export type ConfigValid = FromSchema<typeof api.configValidSchema>;

// Logs.
export type LogsAnswer = FromSchema<typeof api.logsSchema>;
/** One entry of GET /api/logs, and the data of a `log` frame of GET /api/logs/stream. */
export type LogEntry = FromSchema<typeof api.logEntrySchema>;

// Upgrade.
export type UpgradeCheck = FromSchema<typeof api.upgradeCheckSchema>;
export type UpgradeStatus = FromSchema<typeof api.upgradeStatusSchema>;

// Plugin routes (/api/plugins/<tag>/...).
export type MatcherStatus = FromSchema<typeof matcher.matcherStatusSchema>;
export type ProviderStatus = FromSchema<typeof provider.providerStatusSchema>;
export type ProviderReloaded = FromSchema<typeof provider.providerReloadedSchema>;
export type DomainRulesPage = FromSchema<typeof dynset.rulesPageSchema>;
export type DomainRule = DomainRulesPage["rules"][number];
export type DomainRulesAdded = FromSchema<typeof dynset.addedSchema>;
export type DomainRulesRemoved = FromSchema<typeof dynset.removedSchema>;
export type DomainRulesCleared = FromSchema<typeof dynset.clearedSchema>;
export type DomainSetStatus = FromSchema<typeof dynset.setStatusSchema>;
export type CacheEntriesPage = FromSchema<typeof cache.cacheEntriesSchema>;
export type CacheEntry = CacheEntriesPage["entries"][number];
export type CacheFlushed = FromSchema<typeof cache.cacheFlushedSchema>;
export type CronJobsStatus = FromSchema<typeof cron.cronJobsStatusSchema>;
export type CronJobStatus = CronJobsStatus["jobs"][string];
export type CronRunAccepted = FromSchema<typeof cron.cronRunAcceptedSchema>;
export type DownloadsAnswer = FromSchema<typeof download.downloadsSchema>;
export type DownloadItem = DownloadsAnswer["items"][number];
export type DownloadBatch = FromSchema<typeof download.downloadBatchSchema>;

// Query recorder.
export type RecordPage = FromSchema<typeof recorder.recordPageSchema>;
export type RecordRow = RecordPage["records"][number];
/** A record with its execution path: GET records/<id> (its `record`) and each `record` frame of the stream. */
export type FullRecord = FromSchema<typeof recorder.recordDetailSchema>;
export type RecordAnswer = FromSchema<typeof recorder.recordAnswerSchema>;
export type Step = FullRecord["steps"][number];
export type ResourceRecord = RecordRow["answers_json"][number];
export type Distribution = FromSchema<typeof recorder.shareRowsSchema>;
export type ShareRow = Distribution["rows"][number];
export type TopClients = FromSchema<typeof recorder.topClientsSchema>;
export type TopClientRow = TopClients["rows"][number];
export type PluginStats = FromSchema<typeof recorder.pluginStatsSchema>;
export type PluginRow = PluginStats["rows"][number];
export type Latency = FromSchema<typeof recorder.latencySchema>;
export type Timeseries = FromSchema<typeof recorder.timeseriesSchema>;
export type TimePoint = Timeseries["points"][number];

// Clients provider (GET/POST clients, PUT/DELETE clients/<name>, GET groups, POST/DELETE groups/<group>/pause).
export type ClientsAnswer = FromSchema<typeof clients.clientsListSchema>;
export type NamedClient = ClientsAnswer["clients"][number];
export type SeenClient = ClientsAnswer["seen"][number];
export type ClientGroup = ClientsAnswer["groups"][number];
export type GroupsAnswer = FromSchema<typeof clients.groupsListSchema>;
export type NamedClientAnswer = FromSchema<typeof clients.clientAnswerSchema>;
export type GroupPaused = FromSchema<typeof clients.pauseAnswerSchema>;
