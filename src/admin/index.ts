/**
 * The admin operations (stats, policy edits, GC, block listing, purge) and the
 * AdminApi both front ends speak: the server runs them behind /admin
 * (src/serve/admin), the CLI runs them on a data directory with no server
 * (src/cli/local-admin.ts). No HTTP here, so the CLI loads this door alone.
 */
export { AdminService, type AdminServiceOptions, type TierChannel } from './admin-service.ts';
export { BlockAdmin, type BlockAdminDeps } from './block-admin.ts';
export { AdminError, type AdminErrorCode } from './admin-error.ts';
export { policyChangeFor, parsePolicyEdit } from './policy-edits.ts';
export type * from './admin-types.ts';
