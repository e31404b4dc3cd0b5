// The tagged JSON form of rows (tests/wire.py describes it) into the values compare.js takes:
// the database worker sends query rows in it, the tests share their cases in it.
import { Decimal, date, interval, time, timestamp, uuid } from "./compare.js";

function bytes(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function float(text) {
  if (text === "nan") return NaN;
  if (text === "inf") return Infinity;
  if (text === "-inf") return -Infinity;
  return Number(text);
}

export function decode(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  const [[tag, x]] = Object.entries(v);
  switch (tag) {
    case "int":
      return BigInt(x);
    case "float":
      return float(x);
    case "decimal":
      return new Decimal(x);
    case "bytes":
      return bytes(x);
    case "uuid":
      return uuid(x);
    case "timestamp":
      return timestamp(x);
    case "date":
      return date(x);
    case "time":
      return time(x);
    case "interval_us":
      return interval(x);
    case "list":
      return x.map(decode);
    case "json":
      return Object.fromEntries(Object.entries(x).map(([k, e]) => [k, decode(e)]));
    default:
      throw new Error(`no JavaScript value for the tag ${tag}`);
  }
}

export function decodeRows(rows) {
  return rows.map((r) => (Array.isArray(r) ? r.map(decode) : decode(r)));
}
