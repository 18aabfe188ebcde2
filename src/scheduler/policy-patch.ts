/**
 * PUT /admin/policy's merge, one for both modes: the engine thread's tier in
 * embedded mode (tier-admin.ts) and the API process's policy store in cluster
 * mode (bullmq-admin.ts) apply a patch alike.
 *
 *   defaultClass, codec        replaced when given
 *   classes, tenants           merged by name (a named entry is replaced whole)
 *   quotaBytes, clientTtlMaxMs replaced when given; null removes the limit
 *   anything else              ignored (version and updatedAt belong to the store)
 *
 * The result is validated (validatePolicyDoc): a bad patch is a 400, never a
 * stored document.
 */
import { validatePolicyDoc, type RetentionPolicyDoc } from '../kvtier/index.ts';

/** A policy patch as the admin API receives it (null clears an optional limit). */
export type PolicyPatch = Partial<Omit<RetentionPolicyDoc, 'quotaBytes' | 'clientTtlMaxMs'>> & { quotaBytes?: number | null; clientTtlMaxMs?: number | null };

export function patchPolicyDoc(doc: RetentionPolicyDoc, patch: PolicyPatch): RetentionPolicyDoc {
  const merged: RetentionPolicyDoc = {
    ...doc,
    ...(patch.defaultClass !== undefined ? { defaultClass: patch.defaultClass } : {}),
    ...(patch.classes !== undefined ? { classes: { ...doc.classes, ...patch.classes } } : {}),
    ...(patch.tenants !== undefined ? { tenants: { ...doc.tenants, ...patch.tenants } } : {}),
    ...(patch.codec !== undefined ? { codec: patch.codec } : {}),
  };
  for (const limit of ['clientTtlMaxMs', 'quotaBytes'] as const) {
    if (!(limit in patch)) continue;
    const value = patch[limit];
    if (value === null || value === undefined) delete merged[limit];
    else merged[limit] = value;
  }
  return validatePolicyDoc(merged);
}
