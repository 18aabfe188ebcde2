/**
 * OpenAI's gpt-oss template writes the local date into its system message (strftime_now("%Y-%m-%d"),
 * inference-core/synthetic/gptoss-template.ts), so a conversation that crosses local midnight renders a
 * new first message and can hit no cached unit past it. A test asserting exact cache hits through that
 * template runs its body once more when it failed and the date changed while it ran: a second run cannot
 * straddle midnight too, and a failure on one day still fails.
 */
function localDay(): string {
  const d = new Date();
  return `${d.getFullYear()}-${d.getMonth() + 1}-${d.getDate()}`;
}

/** `body`, run again once if `dated` and it failed across local midnight. */
export async function rerunAcrossMidnight<T>(dated: boolean, body: () => Promise<T>): Promise<T> {
  const day = localDay();
  try {
    return await body();
  } catch (err) {
    if (!dated || localDay() === day) throw err;
    return await body();
  }
}
