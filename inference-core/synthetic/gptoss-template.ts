/**
 * kvtier's harmony chat template for gpt-oss (o200k_harmony). No npm package ships gpt-oss's jinja
 * template, so this one is written from the harmony format (openai/harmony, the OpenAI cookbook's
 * "OpenAI Harmony Response Format") and checked against node-llama-cpp 3.21.1's HarmonyChatWrapper,
 * which renders the same format in JS (test/inference-core/gptoss-template.test.ts):
 *
 *   <|start|>system<|message|>{identity}\nKnowledge cutoff: 2024-06\n\nReasoning: {effort}\n\n
 *       # Valid channels: analysis, commentary, final. Channel must be included for every message.
 *       [\nCalls to these tools must go to the commentary channel: 'functions'.]<|end|>
 *   <|start|>developer<|message|># Instructions\n\n{system}[\n\n# Tools … namespace functions { … }]<|end|>
 *   <|start|>user<|message|>{content}<|end|>
 *   <|start|>assistant<|channel|>analysis<|message|>{reasoning}<|end|>       (only after the last user message)
 *   <|start|>assistant<|channel|>commentary<|message|>{content}<|end|>       (content beside tool calls)
 *   <|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}<|call|>
 *   <|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{tool result}<|end|>
 *   <|start|>assistant<|channel|>final<|message|>{content}<|end|>
 *   generation prompt: <|start|>assistant
 *
 * Deliberate differences from the wrapper, each toward the harmony format the model was trained on:
 *   - "# Instructions" also without tools (the wrapper writes "# Instruction" there);
 *   - a space before <|constrain|> in a tool call, as harmony's own examples have it;
 *   - no "Current date" line unless the request passes `current_date` (chat_template_kwargs): a
 *     date in the first message would change every cached prefix at midnight;
 *   - tool results and arguments are the client's strings as sent (the wrapper JSON-dumps values).
 * Reasoning before the last user message is dropped, as harmony asks (the wrapper's
 * keepOnlyLastThought), so a follow-up turn re-renders an earlier reply without its analysis.
 *
 * OpenAI's own template (llama.cpp ships it as models/templates/openai-gpt-oss-120b.jinja; kvtier renders it,
 * test/src/recipe/harmony-openai-template.test.ts) writes history calls with the recipient first
 * (`<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`), optional parameters as `name?:`,
 * integers as number, tool results JSON-encoded, and today's date; this template follows the wrapper instead,
 * the format the brief for #26 fixed. The reply parser (src/recipe/harmony.ts) reads both orderings.
 *
 * Parameters render as the wrapper's TypeScript types: {a: string, b: number}, enums as "x" | "y",
 * arrays as T[], integers as bigint; a property with a description opens the multi-line form.
 */
const T = [
  // A description as // lines, each trimmed (the wrapper trims every line of its types block).
  "{%- macro comment(text) -%}{%- for line in text.split('\\n') -%}{{- '\\n' if not loop.first else '' -}}{{- ('// ' + line | trim) | trim -}}{%- endfor -%}{%- endmacro -%}",
  // TypeScript type of a JSON schema (the subset tool parameters use).
  "{%- macro ts_type(s) -%}",
  "{%- if s.oneOf is defined -%}{%- for a in s.oneOf -%}{{- ' | ' if not loop.first else '' -}}{{- ts_type(a) -}}{%- endfor -%}",
  "{%- elif s.anyOf is defined -%}{%- for a in s.anyOf -%}{{- ' | ' if not loop.first else '' -}}{{- ts_type(a) -}}{%- endfor -%}",
  "{%- elif s.const is defined -%}{{- s.const | tojson -}}",
  "{%- elif s.enum is defined -%}{%- for v in s.enum -%}{{- ' | ' if not loop.first else '' -}}{{- v | tojson -}}{%- endfor -%}",
  "{%- elif s.type == 'object' -%}",
  "{%- set props = s.properties if s.properties is defined and s.properties else {} -%}",
  "{%- set st = namespace(described=false) -%}",
  "{%- for k, p in props.items() -%}{%- if p.description is defined and p.description -%}{%- set st.described = true -%}{%- endif -%}{%- endfor -%}",
  "{%- if st.described -%}",
  "{{- '{\\n' -}}{%- for k, p in props.items() -%}",
  "{%- if p.description is defined and p.description -%}{{- '\\n' if not loop.first else '' -}}{{- comment(p.description) + '\\n' -}}{%- endif -%}",
  "{{- k + ': ' + ts_type(p) -}}{{- ',\\n' if not loop.last else '' -}}",
  "{%- endfor -%}{{ '\\n}' }}",
  "{%- else -%}",
  "{{- '{' -}}{%- for k, p in props.items() -%}{{- ', ' if not loop.first else '' -}}{{- k + ': ' + ts_type(p) -}}{%- endfor -%}{{- '}' -}}",
  "{%- endif -%}",
  "{%- elif s.type == 'array' -%}",
  "{%- if s['items'] is defined -%}{%- set it = ts_type(s['items']) -%}{{- (('(' + it + ')') if ' | ' in it else it) + '[]' -}}{%- else -%}any[]{%- endif -%}",
  "{%- elif s.type is defined -%}",
  "{%- set types = s.type if s.type is not string else [s.type] -%}",
  "{%- set names = {'string': 'string', 'number': 'number', 'integer': 'bigint', 'boolean': 'boolean', 'null': 'null'} -%}",
  "{%- set out = namespace(first=true) -%}",
  "{%- for t in ['string', 'number', 'integer', 'boolean', 'null'] -%}{%- if t in types -%}{{- ('' if out.first else ' | ') + names[t] -}}{%- set out.first = false -%}{%- endif -%}{%- endfor -%}",
  "{%- else -%}any",
  "{%- endif -%}",
  "{%- endmacro -%}",
  // Header: the system message (model identity, cutoff, reasoning effort, channels), then the developer message.
  "{%- set has_tools = tools is defined and tools -%}",
  "{%- set effort = reasoning_effort if reasoning_effort is defined else 'medium' -%}",
  "{{- '<|start|>system<|message|>' + (model_identity if model_identity is defined else 'You are ChatGPT, a large language model trained by OpenAI.') + '\\nKnowledge cutoff: 2024-06' -}}",
  "{%- if current_date is defined -%}{{- '\\nCurrent date: ' + current_date -}}{%- endif -%}",
  "{{- '\\n\\nReasoning: ' + effort + '\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message.' -}}",
  "{%- if has_tools -%}{{- \"\\nCalls to these tools must go to the commentary channel: 'functions'.\" -}}{%- endif -%}",
  "{{- '<|end|>' -}}",
  "{%- set first_system = messages | length > 0 and messages[0].role == 'system' -%}",
  "{%- if first_system or has_tools -%}",
  "{{- '<|start|>developer<|message|># Instructions\\n\\n' -}}",
  "{%- if first_system and messages[0].content -%}{{- messages[0].content -}}{{- '\\n\\n' if has_tools -}}{%- endif -%}",
  "{%- if has_tools -%}",
  "{{- '# Tools\\n\\n## functions\\n\\nnamespace functions {\\n\\n' -}}",
  "{%- for tool in tools -%}{%- set f = tool.function if tool.function is defined else tool -%}",
  "{{- '\\n\\n' if not loop.first -}}",
  "{%- if f.description is defined and f.description and f.description | trim -%}{{- comment(f.description) + '\\n' -}}{%- endif -%}",
  "{{- 'type ' + f.name + ' = (' -}}{%- if f.parameters is defined and f.parameters -%}{{- '_: ' + ts_type(f.parameters) -}}{%- endif -%}{{- ') => any;' -}}",
  "{%- endfor -%}",
  "{{- '\\n\\n} // namespace functions' -}}",
  "{%- endif -%}",
  "{{- '<|end|>' -}}",
  "{%- endif -%}",
  // The transcript. Reasoning is kept only after the last user message (the turn in progress).
  "{%- set ns = namespace(last_user=-1) -%}",
  "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}",
  "{%- for m in messages -%}",
  "{%- if m.role == 'system' -%}",
  "{%- if not loop.first -%}{{- '<|start|>developer<|message|>' + m.content + '<|end|>' -}}{%- endif -%}",
  "{%- elif m.role == 'developer' -%}{{- '<|start|>developer<|message|>' + m.content + '<|end|>' -}}",
  "{%- elif m.role == 'user' -%}{{- '<|start|>user<|message|>' + m.content + '<|end|>' -}}",
  "{%- elif m.role == 'assistant' -%}",
  "{%- set reasoning = m.reasoning_content if m.reasoning_content is defined and m.reasoning_content else (m.thinking if m.thinking is defined and m.thinking else '') -%}",
  "{%- if reasoning and loop.index0 > ns.last_user -%}{{- '<|start|>assistant<|channel|>analysis<|message|>' + reasoning + '<|end|>' -}}{%- endif -%}",
  "{%- if m.tool_calls is defined and m.tool_calls -%}",
  "{%- if m.content -%}{{- '<|start|>assistant<|channel|>commentary<|message|>' + m.content + '<|end|>' -}}{%- endif -%}",
  "{%- for tc in m.tool_calls -%}{%- set call = tc.function if tc.function is defined else tc -%}",
  "{{- '<|start|>assistant<|channel|>commentary to=functions.' + call.name + ' <|constrain|>json<|message|>' -}}",
  // Arguments: the text as sent when a string (kvtier hands the client's own bytes: the `{{ call.arguments }}`
  // makes chat-template-conventions.ts pass text), JSON of an object otherwise (transformers callers).
  "{%- set a = call.arguments -%}{%- if a is string -%}{{- call.arguments -}}{%- else -%}{{- a | tojson -}}{%- endif -%}",
  "{{- '<|call|>' -}}",
  "{%- endfor -%}",
  "{%- else -%}{{- '<|start|>assistant<|channel|>final<|message|>' + (m.content if m.content else '') + '<|end|>' -}}",
  "{%- endif -%}",
  "{%- elif m.role == 'tool' -%}",
  // the tool's name: the message's own, else the call it answers (by id), else the latest call before it
  "{%- set tn = namespace(name=m.name if m.name is defined and m.name else '') -%}",
  "{%- if not tn.name -%}{%- for p in messages[:loop.index0] -%}{%- if p.role == 'assistant' and p.tool_calls is defined and p.tool_calls -%}{%- for tc in p.tool_calls -%}",
  "{%- set call = tc.function if tc.function is defined else tc -%}",
  "{%- if m.tool_call_id is not defined or tc.id is not defined or tc.id == m.tool_call_id -%}{%- set tn.name = call.name -%}{%- endif -%}",
  "{%- endfor -%}{%- endif -%}{%- endfor -%}{%- endif -%}",
  "{{- '<|start|>functions.' + tn.name + ' to=assistant<|channel|>commentary<|message|>' + (m.content if m.content is string else m.content | tojson) + '<|end|>' -}}",
  "{%- endif -%}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}{{- '<|start|>assistant' -}}{%- endif -%}",
];

export const GPTOSS_HARMONY_TEMPLATE = T.join('\n');
