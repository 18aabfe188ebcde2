/**
 * Cache usage → each API's usage fields.
 *
 *   OpenAI:    prompt_tokens = all prompt tokens; prompt_tokens_details.cached_tokens = served from cache
 *   DeepSeek:  prompt_cache_hit_tokens + prompt_cache_miss_tokens = prompt_tokens
 *   Anthropic: input_tokens + cache_read_input_tokens + cache_creation_input_tokens = prompt tokens
 *              (input_tokens is what was neither read from nor written to the cache)
 */
import type { CacheUsage } from './types.ts';

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  /** Present when the reply had a think block (OpenAI's field for reasoning models). */
  completion_tokens_details?: { reasoning_tokens: number };
  prompt_cache_hit_tokens: number;
  prompt_cache_miss_tokens: number;
}

export function openAiUsage(usage: CacheUsage, reasoningTokens?: number): OpenAiUsage {
  return {
    ...(reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: reasoningTokens } } : {}),
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    prompt_cache_hit_tokens: usage.cachedTokens,
    prompt_cache_miss_tokens: usage.promptTokens - usage.cachedTokens,
  };
}

export interface AnthropicUsage {
  input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
  output_tokens: number;
}

export function anthropicUsage(usage: CacheUsage): AnthropicUsage {
  const creation = Math.min(usage.storedPromptTokens, usage.promptTokens - usage.cachedTokens);
  return {
    input_tokens: usage.promptTokens - usage.cachedTokens - creation,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation_input_tokens: creation,
    output_tokens: usage.completionTokens,
  };
}
