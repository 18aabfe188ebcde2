/** Cluster-wide counters, their history, and the figures computed from them. Import from here only. */
export { C, TENANT_FIELDS, gapCounter, parseGapCounter, type GapField, blocksGauge, bytesGauge, parseTenantCounter, tenantCounter, type TenantField } from './counter-names.ts';
export { LmdbStatsStore, RedisStatsStore, type RedisConnect, type StatsPoint, type StatsStore, type StatsStoreOptions, coarseStepMs } from './stats-store.ts';
export { StatsRecorder, type RequestUsage, type StatsRecorderOptions, type TierSample, type TierSources } from './stats-recorder.ts';
export { computeOverview, computeSeries, costUsd, seriesIntervalMs, type Overview, type Series, type SeriesWindow, type TenantFigures } from './overview.ts';
export { DEFAULT_PRICING, PricingError, loadPricing, type Pricing } from './pricing.ts';
export { openStatsStore } from './open-stats-store.ts';
export { WHAT_IF_TTLS, computeWhatIf, type WhatIf, type WhatIfClass, type WhatIfRow } from './what-if.ts';
