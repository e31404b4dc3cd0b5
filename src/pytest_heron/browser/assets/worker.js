// The runner's database: PGlite in a Web Worker, so that a statement past its time limit can be
// stopped by terminating the worker (PGlite 0.2 runs PostgreSQL in-process and does not honour
// statement_timeout: a test showed pg_sleep(3) and a 30-million-row count running to the end).
//
// Messages in:  {id, type: "load"} | {id, type: "checksums"} | {id, type: "query", sql, maxRows}
// Messages out: {type: "progress", done, total, table} and {id, ok, result | error}
// Query rows come back in the tagged form of tests/wire.py (structured clone keeps no classes);
// wire.js turns them into the comparator's values.

import { checksums, loadState } from "./state.js";

const base = new URL("../", import.meta.url);
let db = null;
let manifest = null;

async function read(name) {
  const response = await fetch(new URL("state/" + name, base));
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// --- PostgreSQL text output to the tagged form ------------------------------------------------

const floatText = (t) => ({ float: t === "NaN" ? "nan" : t === "Infinity" ? "inf" : t === "-Infinity" ? "-inf" : t });

const UNITS = { year: 365n * 86400n, mon: 30n * 86400n, day: 86400n };

/** An interval's text (IntervalStyle postgres) as microseconds, months as 30 days (psycopg). */
function intervalMicros(text) {
  let us = 0n;
  const re = /([+-]?\d+) (year|mon|day)s?|([+-])?(\d+):(\d\d):(\d\d)(?:\.(\d+))?/g;
  for (const m of text.matchAll(re)) {
    if (m[2]) us += BigInt(m[1]) * UNITS[m[2]] * 1_000_000n;
    else {
      const secs = BigInt(m[4]) * 3600n + BigInt(m[5]) * 60n + BigInt(m[6]);
      const part = secs * 1_000_000n + BigInt((m[7] ?? "").padEnd(6, "0").slice(0, 6) || "0");
      us += m[3] === "-" ? -part : part;
    }
  }
  return { interval_us: String(us) };
}

function jsonValue(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "number") return Number.isInteger(v) && Math.abs(v) < 2 ** 53 ? { int: String(v) } : { float: String(v) };
  if (Array.isArray(v)) return { list: v.map(jsonValue) };
  return { json: Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonValue(x)])) };
}

function jsonText(text) {
  // integer literals stay integers (as Python's json.loads reads them) where the source is known
  const parsed = JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && context?.source !== undefined) {
      return /^-?\d+$/.test(context.source) ? { __int: context.source } : { __float: String(value) };
    }
    return value;
  });
  const walk = (v) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if ("__int" in v) return { int: v.__int };
      if ("__float" in v) return { float: v.__float };
      return { json: Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)])) };
    }
    if (Array.isArray(v)) return { list: v.map(walk) };
    return jsonValue(v);
  };
  return walk(parsed);
}

/** A PostgreSQL array literal's elements, nested, each element's text read by `element`. */
function arrayText(text, element) {
  let i = 0;
  const value = () => {
    if (text[i] === "{") {
      i += 1;
      const out = [];
      while (text[i] !== "}") {
        out.push(value());
        if (text[i] === ",") i += 1;
      }
      i += 1;
      return { list: out };
    }
    if (text[i] === '"') {
      i += 1;
      let s = "";
      while (text[i] !== '"') {
        if (text[i] === "\\") i += 1;
        s += text[i];
        i += 1;
      }
      i += 1;
      return element(s);
    }
    let s = "";
    while (text[i] !== "," && text[i] !== "}") s += text[i++];
    return s === "NULL" ? null : element(s);
  };
  if (text.startsWith("[")) text = text.slice(text.indexOf("=") + 1); // explicit bounds
  return value();
}

const SCALARS = {
  16: (t) => t === "t",
  17: (t) => ({ bytes: t.startsWith("\\x") ? t.slice(2) : t }),
  20: (t) => ({ int: t }),
  21: (t) => ({ int: t }),
  23: (t) => ({ int: t }),
  26: (t) => ({ int: t }),
  700: floatText,
  701: floatText,
  1700: (t) => ({ decimal: t }),
  1082: (t) => ({ date: t }),
  1083: (t) => ({ time: t }),
  1114: (t) => ({ timestamp: t.replace(" ", "T") }),
  1184: (t) => ({ timestamp: t.replace(" ", "T") }),
  1186: intervalMicros,
  2950: (t) => ({ uuid: t }),
  114: jsonText,
  3802: jsonText,
};
const ARRAYS = { 1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1021: 700, 1022: 701, 1231: 1700, 1182: 1082, 1183: 1083, 1115: 1114, 1185: 1184, 1187: 1186, 2951: 2950, 199: 114, 3807: 3802, 1009: 25, 1015: 1043 };

const text = (t) => t;
const parsers = { ...SCALARS };
for (const [arrayOid, elementOid] of Object.entries(ARRAYS)) {
  const element = SCALARS[elementOid] ?? text;
  parsers[arrayOid] = (t) => arrayText(t, element);
}
// every other type comes back as its text, as psycopg gives it
const RAW = [18, 19, 25, 1042, 1043, 1560, 1562, 142, 650, 869, 829, 774, 790, 1266, 600, 601, 602, 603, 604, 628, 718, 3614, 3615, 3734, 3769, 2205, 2206, 24, 2202, 2203, 2204, 4089, 4096];
for (const oid of RAW) parsers[oid] ??= text;

// --- requests ---------------------------------------------------------------------------------

async function load() {
  const { PGlite } = await import(new URL("pglite/index.js", base).href);
  db = new PGlite({ parsers });
  await db.waitReady;
  manifest = await loadState(db, read, (p) => postMessage({ type: "progress", ...p }));
  return manifest;
}

async function query(sql, maxRows) {
  await db.exec("BEGIN READ ONLY");
  try {
    const result = await db.query(sql, [], { rowMode: "array", parsers });
    const rows = result.rows;
    if (rows.length > maxRows) {
      return { tooLarge: `the result has more than ${maxRows.toLocaleString("en")} rows` };
    }
    return {
      columns: result.fields.map((f) => f.name),
      types: result.fields.map((f) => f.dataTypeID),
      rows: rows.map((r) => r.map((v) => (v === null ? null : v))),
    };
  } finally {
    await db.exec("ROLLBACK");
  }
}

onmessage = async (event) => {
  const { id, type } = event.data;
  try {
    let result;
    if (type === "load") result = await load();
    else if (type === "checksums") result = await checksums(db, manifest.schemas);
    else if (type === "query") result = await query(event.data.sql, event.data.maxRows);
    else throw new Error(`unknown request ${type}`);
    postMessage({ id, ok: true, result });
  } catch (exc) {
    postMessage({ id, ok: false, error: String(exc?.message ?? exc) });
  }
};
