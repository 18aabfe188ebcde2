/** The operator's side of the API process: admin routes beyond stats/policy/gc, the stats recorder, the dashboard. */
export { setupAdmin, type AdminSetup, type AdminSetupOptions } from './admin-setup.ts';
export { AdminService, type AdminServiceOptions, type TierChannel } from './admin-service.ts';
export { BlockAdmin, type BlockAdminDeps } from './block-admin.ts';
export { AdminError, type AdminErrorCode } from './admin-error.ts';
export { policyChangeFor, parsePolicyEdit } from './policy-edits.ts';
export { registerAdminApi } from './admin-routes.ts';
export { adminPlugin, type AdminPluginOptions } from './admin-plugin.ts';
export type * from './admin-types.ts';
