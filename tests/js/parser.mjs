// The guard's parser in Node: the runner's vendored libpg-query files (libpg-query.js and
// libpg-query.wasm, unpacked by tests/node_js.py into the folder $HERON_LIBPG_QUERY names, as
// CommonJS) loaded into assets/guard.js, as the page's script tag loads them.
import { createRequire } from "node:module";
import { join } from "node:path";

import { startGuard } from "../../src/pytest_heron/browser/assets/guard.js";

export { checkStatement, startGuard } from "../../src/pytest_heron/browser/assets/guard.js";

const folder = process.env.HERON_LIBPG_QUERY;
if (!folder) {
  throw new Error("HERON_LIBPG_QUERY must name the unpacked libpg-query folder (tests/node_js.py sets it)");
}
export const factory = createRequire(import.meta.url)(join(folder, "libpg-query.js"));
startGuard(factory);
