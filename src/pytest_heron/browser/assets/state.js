// Loading the benchmark state into PGlite, and the per-table checksums of heron checksum.
//
// Both run in the page's database worker and in Node (tests): `read(name)` gives the bytes of a
// file of the runner folder (state.json, schema.sql, data/*.copy.gz).

// The session settings of pytest_heron.database.checksum, so the dump is byte for byte the same.
export const CHECKSUM_SETTINGS = [
  "SET TimeZone = 'UTC'",
  "SET DateStyle = 'ISO, YMD'",
  "SET IntervalStyle = 'postgres'",
  "SET extra_float_digits = 1",
  "SET bytea_output = 'hex'",
];

const quote = (name) => '"' + name.replaceAll('"', '""') + '"';
const qualified = (fq) => fq.split(".").map(quote).join(".");

async function gunzip(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * Create the schema and COPY every table in; `progress({done, total, table})` counts rows.
 * Returns the manifest (state.json).
 */
export async function loadState(db, read, progress = () => {}) {
  const text = (bytes) => new TextDecoder().decode(bytes);
  const manifest = JSON.parse(text(await read("state.json")));
  const total = manifest.rows;
  let done = 0;
  progress({ done, total, table: "schema" });
  await db.exec("SET client_min_messages = warning");
  await db.exec(text(await read("schema.sql")));
  for (const t of manifest.tables) {
    const raw = await gunzip(await read(t.file));
    if (raw.length !== t.bytes) throw new Error(`${t.file}: ${raw.length} bytes, expected ${t.bytes}`);
    const columns = t.columns.map(quote).join(", ");
    await db.query(`COPY ${qualified(t.table)} (${columns}) FROM '/dev/blob'`, [], { blob: new Blob([raw]) });
    done += t.rows;
    progress({ done, total, table: t.table });
  }
  progress({ done, total, table: "keys, indexes and statistics" });
  await db.exec(text(await read("constraints.sql")));
  await db.exec("ANALYZE");
  progress({ done: total, total, table: "" });
  return manifest;
}

async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** [[name, rows, sha256], ...] per table in name order, then the total line, as heron checksum. */
export async function checksums(db, schemas) {
  for (const stmt of CHECKSUM_SETTINGS) await db.exec(stmt);
  const tables = await db.query(
    "SELECT table_schema, table_name FROM information_schema.tables" +
      " WHERE table_type = 'BASE TABLE' AND table_schema = ANY(string_to_array($1, ',')) ORDER BY 1, 2",
    [schemas.join(",")],
  );
  const lines = [];
  for (const { table_schema: schema, table_name: table } of tables.rows) {
    const keyed = await db.query(
      `SELECT a.attname FROM pg_index i
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
       WHERE i.indrelid = $1::regclass AND i.indisprimary
       ORDER BY array_position(i.indkey, a.attnum)`,
      [`${quote(schema)}.${quote(table)}`],
    );
    let order = keyed.rows.map((r) => r.attname);
    if (!order.length) {
      const cols = await db.query(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = $1" +
          " AND table_name = $2 ORDER BY ordinal_position",
        [schema, table],
      );
      order = cols.rows.map((r) => r.column_name);
    }
    const dump = await db.query(
      `COPY (SELECT * FROM ${quote(schema)}.${quote(table)} ORDER BY ${order.map(quote).join(", ")}) TO '/dev/blob'`,
    );
    const bytes = new Uint8Array(await dump.blob.arrayBuffer());
    let rows = 0;
    for (const b of bytes) if (b === 10) rows += 1;
    lines.push([`${schema}.${table}`, rows, await sha256Hex(bytes)]);
  }
  const all = lines.map(([n, r, s]) => `${n}\t${r}\t${s}\n`).join("");
  const total = lines.reduce((sum, l) => sum + l[1], 0);
  lines.push(["total", total, await sha256Hex(new TextEncoder().encode(all))]);
  return lines;
}
