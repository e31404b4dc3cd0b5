// node tests/js/state_checksums.mjs RUNNER_DIR PGLITE_INDEX_JS: loads the runner folder's state
// into PGlite's Node build and prints the checksum lines of heron checksum (tab-separated).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { checksums, loadState } from "../../src/pytest_heron/browser/assets/state.js";

const [folder, pglite] = process.argv.slice(2);
const { PGlite } = await import(pathToFileURL(pglite).href);
const db = new PGlite();
await db.waitReady;
const manifest = await loadState(db, (name) => readFile(join(folder, name)), ({ done, total, table }) =>
  process.stderr.write(`${done}/${total} ${table}\n`),
);
for (const [name, rows, sha] of await checksums(db, manifest.schemas)) {
  process.stdout.write(`${name}\t${rows}\t${sha}\n`);
}
await db.close();
