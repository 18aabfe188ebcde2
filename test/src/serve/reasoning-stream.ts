/** A streamed chat completion's reasoning_content and content deltas, each concatenated. */
export async function collectReasoningStream(stream: AsyncIterable<{ choices: Array<{ delta?: unknown }> }>): Promise<{ reasoning: string; content: string }> {
  let reasoning = '';
  let content = '';
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
    if (delta?.reasoning_content) reasoning += delta.reasoning_content;
    if (delta?.content) content += delta.content;
  }
  return { reasoning, content };
}
