/**
 * JSON schemas of every route's body. Unknown fields are allowed (SDKs send
 * fields we ignore); the fields we read are typed and bounded here, so the
 * handlers see well-formed input and a bad field is a 400 naming it.
 */

const textPart = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string' }, text: { type: 'string' } },
};

const openAiContent = {
  anyOf: [{ type: 'string' }, { type: 'null' }, { type: 'array', items: textPart }],
};

/** OpenAI prompt caching fields and kvtier's no-store switch (values checked by recipe/cache-retention.ts). */
const cacheRetentionFields = {
  prompt_cache_key: { type: ['string', 'null'] },
  prompt_cache_retention: { type: ['string', 'null'] },
  kvtier_cache: { type: ['string', 'null'] },
};

/** Longest stop string: the matcher holds back up to its length of reply text and scans it per token. */
export const MAX_STOP_CHARS = 1024;
/** The sampler's top_k is a 32-bit int; any value ≥ the vocabulary keeps every token anyway. */
const MAX_TOP_K = 2147483647;
const stopString = { type: 'string', maxLength: MAX_STOP_CHARS };
/** Template variables: each becomes a variable of the template's scope, which every render copies (200k keys took 20 s). */
const templateKwargs = { type: 'object', maxProperties: 64 };
/** Tool names as the reference APIs take them (no spaces, control characters or punctuation a template could choke on). */
const toolName = { type: 'string', minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$' };

const sampling = {
  temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
  top_p: { type: ['number', 'null'], exclusiveMinimum: 0, maximum: 1 },
  top_k: { type: ['integer', 'null'], minimum: 0, maximum: MAX_TOP_K },
  // OpenAI's seed is a 64-bit signed integer.
  seed: { type: ['integer', 'null'], minimum: -9223372036854775808, maximum: 9223372036854775807 },
  n: { type: ['integer', 'null'], minimum: 1 },
  // OpenAI takes up to 4 stop sequences.
  stop: { type: ['string', 'array', 'null'], maxLength: MAX_STOP_CHARS, items: stopString, maxItems: 4 },
  // Applied by the sampler as OpenAI documents them (inference-core/sampling/logit-adjust.ts).
  presence_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
  frequency_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
  // Token id (a decimal string) → bias in [-100, 100]; ids past the vocabulary are refused by the route (routes/common.ts checkLogitBias).
  logit_bias: { type: ['object', 'null'], propertyNames: { pattern: '^(0|[1-9][0-9]{0,9})$' }, additionalProperties: { type: 'number', minimum: -100, maximum: 100 } },
  stream: { type: ['boolean', 'null'] },
  stream_options: { anyOf: [{ type: 'null' }, { type: 'object', properties: { include_usage: { type: 'boolean' } } }] },
  kvtier_class: { type: 'string', minLength: 1, maxLength: 64 },
  user: { type: 'string' },
  // Retention hints: checked and named by recipe/cache-retention.ts (types only here, so its messages list the allowed values).
  ...cacheRetentionFields,
};

export const chatCompletionsBody = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role'],
        properties: {
          role: { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool'] },
          content: openAiContent,
          name: { type: 'string' },
          tool_call_id: { type: 'string' },
          reasoning_content: { type: ['string', 'null'] },
          tool_calls: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'function'],
              properties: {
                id: { type: 'string' },
                type: { type: 'string', enum: ['function'] },
                function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'string' } } },
              },
            },
          },
        },
      },
    },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        required: ['type', 'function'],
        properties: {
          type: { type: 'string', enum: ['function'] },
          function: {
            type: 'object',
            required: ['name'],
            properties: { name: toolName, description: { type: 'string' }, parameters: { type: 'object' } },
          },
        },
      },
    },
    tool_choice: { anyOf: [{ type: 'string', enum: ['none', 'auto', 'required'] }, { type: 'object' }] },
    max_tokens: { type: ['integer', 'null'], minimum: 1 },
    max_completion_tokens: { type: ['integer', 'null'], minimum: 1 },
    chat_template_kwargs: templateKwargs,
    enable_thinking: { type: 'boolean' },
    ...sampling,
  },
} as const;

export const completionsBody = {
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    model: { type: 'string', minLength: 1 },
    prompt: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'integer', minimum: 0 }, minItems: 1 }, { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 1 }] },
    max_tokens: { type: ['integer', 'null'], minimum: 1 },
    echo: { type: ['boolean', 'null'] },
    ...sampling,
  },
} as const;

const anthropicText = { type: 'object', required: ['type', 'text'], properties: { type: { const: 'text' }, text: { type: 'string' } } };

export const messagesBody = {
  type: 'object',
  required: ['model', 'max_tokens', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    max_tokens: { type: 'integer', minimum: 1 },
    system: { anyOf: [{ type: 'string' }, { type: 'array', items: anthropicText }] },
    messages: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['role', 'content'],
        properties: {
          role: { type: 'string', enum: ['user', 'assistant'] },
          content: {
            anyOf: [
              { type: 'string' },
              {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['type'],
                  properties: {
                    type: { type: 'string' },
                    text: { type: 'string' },
                    id: { type: 'string' },
                    name: { type: 'string' },
                    input: { type: 'object' },
                    tool_use_id: { type: 'string' },
                    content: { anyOf: [{ type: 'string' }, { type: 'array', items: anthropicText }] },
                    is_error: { type: 'boolean' },
                    thinking: { type: 'string' },
                  },
                },
              },
            ],
          },
        },
      },
    },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'input_schema'],
        properties: { name: toolName, description: { type: 'string' }, input_schema: { type: 'object' } },
      },
    },
    tool_choice: { type: 'object', required: ['type'], properties: { type: { type: 'string', enum: ['auto', 'any', 'tool', 'none'] } } },
    temperature: { type: 'number', minimum: 0, maximum: 1 },
    top_p: { type: 'number', exclusiveMinimum: 0, maximum: 1 },
    top_k: { type: 'integer', minimum: 0, maximum: MAX_TOP_K },
    stop_sequences: { type: 'array', items: stopString, maxItems: 16 },
    stream: { type: 'boolean' },
    metadata: { type: 'object' },
    kvtier_class: { type: 'string', minLength: 1, maxLength: 64 },
    kvtier_cache: cacheRetentionFields.kvtier_cache,
    thinking: { type: 'object', required: ['type'], properties: { type: { type: 'string', enum: ['enabled', 'disabled'] }, budget_tokens: { type: 'integer', minimum: 0 } } },
    chat_template_kwargs: templateKwargs,
    enable_thinking: { type: 'boolean' },
  },
} as const;

/** POST /v1/responses: items are checked further by the codec (recipe/responses-format.ts), which names the field. */
const responsesParts = { type: 'array', items: { type: 'object', required: ['type'], properties: { type: { type: 'string' }, text: { type: 'string' } } } };

export const responsesBody = {
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string', minLength: 1 },
    instructions: { type: ['string', 'null'] },
    input: {
      anyOf: [
        { type: 'string' },
        {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              type: { type: 'string' },
              role: { type: 'string' },
              content: { anyOf: [{ type: 'string' }, responsesParts] },
              call_id: { type: 'string' },
              name: { type: 'string' },
              arguments: { type: 'string' },
              output: { anyOf: [{ type: 'string' }, responsesParts] },
            },
          },
        },
      ],
    },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        required: ['type'],
        properties: { type: { type: 'string' }, name: toolName, description: { type: ['string', 'null'] }, parameters: { type: ['object', 'null'] }, strict: { type: ['boolean', 'null'] } },
      },
    },
    tool_choice: { anyOf: [{ type: 'string', enum: ['none', 'auto', 'required'] }, { type: 'object' }] },
    text: { type: ['object', 'null'], properties: { format: { anyOf: [{ type: 'null' }, { type: 'object', required: ['type'], properties: { type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] }, name: { type: 'string' }, schema: {}, strict: { type: ['boolean', 'null'] } } }] } } },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1 },
    store: { type: ['boolean', 'null'] },
    previous_response_id: { type: ['string', 'null'] },
    // include values, background and truncation semantics: recipe/responses-include.ts, routes/openai-responses.ts.
    include: { type: ['array', 'null'], items: { type: 'string' } },
    background: { type: ['boolean', 'null'] },
    truncation: { anyOf: [{ type: 'string', enum: ['auto', 'disabled'] }, { type: 'null' }] },
    // As the reference: up to 16 pairs, keys ≤ 64 characters, string values ≤ 512 (the response echoes it).
    metadata: { type: ['object', 'null'], maxProperties: 16, propertyNames: { maxLength: 64 }, additionalProperties: { type: 'string', maxLength: 512 } },
    parallel_tool_calls: { type: ['boolean', 'null'] },
    chat_template_kwargs: templateKwargs,
    enable_thinking: { type: 'boolean' },
    temperature: sampling.temperature,
    top_p: sampling.top_p,
    top_k: sampling.top_k,
    seed: sampling.seed,
    stream: sampling.stream,
    kvtier_class: sampling.kvtier_class,
    user: sampling.user,
    ...cacheRetentionFields,
  },
} as const;

export const policyBody = {
  type: 'object',
  properties: {
    defaultClass: { type: 'string' },
    classes: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        required: ['ttlMs'],
        properties: { ttlMs: { type: 'integer', minimum: 1 }, quotaBytes: { type: 'integer', minimum: 0 }, codec: { type: 'string', enum: ['none', 'int8', 'fp8', 'int4'] } },
      },
    },
    quotaBytes: { type: ['integer', 'null'], minimum: 0 },
    tenants: { type: 'object' },
    clientTtlMaxMs: { type: ['integer', 'null'], minimum: 1000 },
    // Block codec for new blocks (kvtier/codecs); refused when its measured deviation on the served model is beyond its bound, unless force.
    codec: { type: 'string', enum: ['none', 'int8', 'fp8', 'int4'] },
    force: { type: 'boolean' },
  },
  additionalProperties: false,
} as const;

export const emptyBody = { type: 'object' } as const;
