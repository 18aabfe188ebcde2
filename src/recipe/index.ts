export * from './types.ts';
export { ReplyMemory } from './reply-memory.ts';
export { ChatPromptBuilder, encodeCompletionPrompt, type ChatPrompt } from './chat-prompt.ts';
export * from './tool-calls.ts';
export * from './usage.ts';
export * from './openai-format.ts';
export * from './anthropic-format.ts';
export { StopStringMatcher } from './stop-strings.ts';
export { promptCodecFromGgufFile, promptCodecFrom } from './gguf-codec.ts';
