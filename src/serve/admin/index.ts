/** The operator's side of the API process: admin routes beyond stats/policy/gc, the stats recorder, the dashboard. The operations themselves live in src/admin. */
export { setupAdmin, type AdminSetup, type AdminSetupOptions } from './admin-setup.ts';
export { registerAdminApi } from './admin-routes.ts';
export { adminPlugin, type AdminPluginOptions } from './admin-plugin.ts';
