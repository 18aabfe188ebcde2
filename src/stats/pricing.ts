/**
 * The price list the dashboard bills traffic at, and the hardware cost it
 * sets against the revenue.
 *
 * Default prices: DeepSeek's published API list for deepseek-v4-flash, USD
 * per million tokens — cache-hit input 0.0028, cache-miss input 0.14, output
 * 0.28. Default GPU cost: 7 USD per GPU-hour (a rental price). Override with
 * KVTIER_PRICE_HIT_PER_M, KVTIER_PRICE_MISS_PER_M, KVTIER_PRICE_OUTPUT_PER_M,
 * KVTIER_PRICE_SOURCE, KVTIER_GPU_HOUR_USD, KVTIER_GPUS_PER_ENGINE,
 * KVTIER_STORAGE_USD_PER_GB_MONTH (default 0.023, S3 Standard; the what-if's storage cost).
 */
export interface Pricing {
  /** USD per million prompt tokens served from the cache. */
  hitPerMillion: number;
  /** USD per million prompt tokens computed (cache miss). */
  missPerMillion: number;
  /** USD per million generated tokens. */
  outputPerMillion: number;
  /** Where the prices come from (shown on the page). */
  source: string;
  /** USD per GPU-hour of the hardware running the engines. */
  gpuHourUsd: number;
  /** GPUs behind one engine (an engine-hour costs gpuHourUsd × this). */
  gpusPerEngine: number;
  /** USD per GB-month of block storage (the what-if's storage cost; GB = 1e9 bytes, month = 30 days). */
  storageUsdPerGbMonth: number;
}

export const DEFAULT_PRICING: Pricing = Object.freeze({
  hitPerMillion: 0.0028,
  missPerMillion: 0.14,
  outputPerMillion: 0.28,
  source: "DeepSeek's published API price list, deepseek-v4-flash (USD per 1M tokens)",
  gpuHourUsd: 7,
  gpusPerEngine: 1,
  // S3 Standard's first-tier list price.
  storageUsdPerGbMonth: 0.023,
});

const ENV: Array<[keyof Pricing, string]> = [
  ['hitPerMillion', 'KVTIER_PRICE_HIT_PER_M'],
  ['missPerMillion', 'KVTIER_PRICE_MISS_PER_M'],
  ['outputPerMillion', 'KVTIER_PRICE_OUTPUT_PER_M'],
  ['gpuHourUsd', 'KVTIER_GPU_HOUR_USD'],
  ['gpusPerEngine', 'KVTIER_GPUS_PER_ENGINE'],
  ['storageUsdPerGbMonth', 'KVTIER_STORAGE_USD_PER_GB_MONTH'],
];

export class PricingError extends Error {
  readonly code = 'KVT_ERR_CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'PricingError';
  }
}

/** Defaults, overridden by the environment; a bad number stops the start with a message naming the variable. */
export function loadPricing(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Pricing> = {}): Pricing {
  const pricing: Pricing = { ...DEFAULT_PRICING };
  for (const [field, name] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < 0) throw new PricingError(`${name}=${raw} is not a non-negative number (USD)`);
    (pricing as unknown as Record<string, number>)[field] = value;
  }
  if (env.KVTIER_PRICE_SOURCE) pricing.source = env.KVTIER_PRICE_SOURCE;
  else if (ENV.slice(0, 3).some(([, name]) => env[name])) pricing.source = 'custom price list (KVTIER_PRICE_* environment variables)';
  return { ...pricing, ...overrides };
}
