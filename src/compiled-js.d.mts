/** The build this checkout's sources have now (made if missing), or null and why (src/compiled-js.mjs). */
export function compiledRoot(): { root: string | null; why: string };
/** The built .js twin of a .ts module of this checkout, or null: run the .ts through tsx then. */
export function compiledModule(tsModule: URL): URL | null;
