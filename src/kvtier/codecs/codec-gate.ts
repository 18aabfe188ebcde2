/**
 * The policy's quality gate for codecs: a policy change that names a codec
 * (document-wide or for a class) is checked against that codec's measured
 * deviation on the served model (codec-quality.ts), measured once per codec
 * on first use where the engine runs. Without an engine (the API process in
 * BullMQ mode) nothing is measured and a codec other than none needs `force`.
 */
import { assertCodecWithinBound, CODEC_REL_DEV_BOUND, measureCodecQuality, type CodecProbeEngine, type CodecQuality, type MeasureOptions } from './codec-quality.ts';
import { isBlockCodecName, type BlockCodecName } from './kv-codecs.ts';

export interface CodecPolicyPatch {
  codec?: unknown;
  classes?: Record<string, { codec?: unknown } | undefined>;
}

/** The valid codec names a policy patch sets (invalid ones are left to validatePolicyDoc). */
export function codecsNamedIn(patch: CodecPolicyPatch): BlockCodecName[] {
  const named = new Set<BlockCodecName>();
  if (isBlockCodecName(patch.codec)) named.add(patch.codec);
  for (const spec of Object.values(patch.classes ?? {})) if (isBlockCodecName(spec?.codec)) named.add(spec.codec);
  return [...named];
}

export class CodecGate {
  private readonly measured = new Map<BlockCodecName, CodecQuality>();

  constructor(
    private readonly engine?: CodecProbeEngine,
    private readonly bounds: Record<BlockCodecName, number> = CODEC_REL_DEV_BOUND,
    private readonly options: MeasureOptions = {},
  ) {}

  /** The codec's measurement on the served model (measured now if it has not been), or undefined without an engine. */
  quality(codec: BlockCodecName): CodecQuality | undefined {
    if (this.engine === undefined) return undefined;
    let q = this.measured.get(codec);
    if (q === undefined) {
      [q] = measureCodecQuality(this.engine, [codec], this.options);
      this.measured.set(codec, q);
    }
    return q;
  }

  /** Throws KVT_ERR_POLICY_CODEC_QUALITY / _UNMEASURED for a codec of the patch beyond its bound, unless `force`. */
  checkPatch(patch: CodecPolicyPatch, force: boolean): void {
    for (const codec of codecsNamedIn(patch)) assertCodecWithinBound(codec, force || codec === 'none' ? undefined : this.quality(codec), force, this.bounds);
  }

  /** What has been measured so far. */
  measurements(): CodecQuality[] {
    return [...this.measured.values()];
  }
}
