// The result-set comparator of pytest_heron.compare, ported to JavaScript for the browser runner.
//
// Same rules, same verdicts (tests/data/compare_cases.json and a property test hold both
// implementations to that): rows are a multiset unless gold is ordered, columns are matched by
// content, numbers compare by value (two integers exactly, otherwise within a relative 1e-6, and
// a non-integer equals an integer only when it rounds to it), NULL equals NULL, text is exact.
//
// Values, as the runner builds them from PostgreSQL's output:
//   null; booleans; strings; bigint = an integer (int2/int4/int8); number = a float
//   (float4/float8); Decimal = numeric; Uint8Array = bytea; Tagged = date, time, timestamp,
//   timestamptz, interval, uuid (a canonical key plus the text shown); arrays = SQL arrays and
//   JSON arrays; plain objects = JSON objects.
//
// Where the Python version uses numpy codes and hashes, this one uses strings: a value's key is
// a string such that equal keys imply equal values, and a column's signature is its sorted keys.
// Codes only ever proposed equality there, so the verdicts do not depend on that choice.

export const REL_TOL = 1e-6;
const TWO20 = 2 ** 20;
const TWO21 = 2 ** 21;
const EXACT_INT = 2 ** 53;
const REPR_CAP = 200;
const MAX_MAPPING_TRIES = 120;
const MAPPING_CELL_BUDGET = 20_000_000;
const MAX_SEARCH_NODES = 100_000;
const TOLERANT_TRIES = 3;
const SMALL_CELLS = 10_000;
const DIAG_MIN_SAMPLE = 1_000;
const DIAG_CELL_BUDGET = 10_000_000;
const PAIR_BUDGET = 250_000;
const MAX_TOLERANT_ROWS = 200_000;

// ---------------------------------------------------------------------------------------------
// value kinds

/** A PostgreSQL numeric: sign, coefficient digits and a base-10 exponent (trailing zeros kept). */
export class Decimal {
  constructor(text) {
    const s = String(text).trim();
    const special = /^([+-])?(nan|snan|inf|infinity)$/i.exec(s);
    this.text = s;
    if (special) {
      this.neg = special[1] === "-";
      this.special = special[2].toLowerCase().endsWith("nan") ? "nan" : "inf";
      this.coef = 0n;
      this.exp = 0;
      this.digits = "0";
      return;
    }
    const m = /^([+-])?(?:(\d+)(?:\.(\d*))?|\.(\d+))(?:[eE]([+-]?\d+))?$/.exec(s);
    if (!m) throw new TypeError(`not a decimal: ${s}`);
    const whole = m[2] ?? "";
    const frac = m[3] ?? m[4] ?? "";
    let digits = (whole + frac).replace(/^0+(?=\d)/, "");
    if (digits === "") digits = "0";
    this.neg = m[1] === "-";
    this.special = null;
    this.digits = digits;
    this.coef = BigInt(digits);
    this.exp = Number(m[5] ?? 0) - frac.length;
  }

  get finite() {
    return this.special === null;
  }

  /** Python's str(Decimal): the General Decimal Arithmetic to-scientific-string. */
  toString() {
    const sign = this.neg ? "-" : "";
    if (this.special === "nan") return "NaN";
    if (this.special === "inf") return sign + "Infinity";
    const c = this.digits;
    const e = this.exp;
    const adjusted = e + c.length - 1;
    if (e <= 0 && adjusted >= -6) {
      if (e === 0) return sign + c;
      if (c.length > -e) return sign + c.slice(0, c.length + e) + "." + c.slice(c.length + e);
      return sign + "0." + "0".repeat(-e - c.length) + c;
    }
    const mant = c.length > 1 ? c[0] + "." + c.slice(1) : c;
    return sign + mant + "E" + (adjusted >= 0 ? "+" : "-") + Math.abs(adjusted);
  }
}

/** A value compared by a canonical key (dates, times, timestamps, intervals, uuids). */
export class Tagged {
  constructor(kind, key, text) {
    this.kind = kind;
    this.key = key;
    this.text = text;
  }
  toString() {
    return this.text;
  }
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

function micros(frac) {
  return BigInt((frac ?? "").padEnd(6, "0").slice(0, 6) || "0");
}

function dayNumber(y, mo, d) {
  return BigInt(Math.floor(Date.UTC(y, mo - 1, d) / 86_400_000));
}

const TS = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?|Z)?$/;

/** A timestamp from ISO text; with an offset (or Z) it is an instant, else a naive one. */
export function timestamp(text) {
  const m = TS.exec(String(text).trim());
  if (!m) return String(text);
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const us =
    ((dayNumber(y, mo, d) * 24n + BigInt(h)) * 60n + BigInt(mi)) * 60_000_000n +
    BigInt(s) * 1_000_000n +
    micros(m[7]);
  const fracText = m[7] && BigInt(m[7].padEnd(6, "0").slice(0, 6)) !== 0n ? "." + m[7].padEnd(6, "0").slice(0, 6) : "";
  const base = `${m[1]}-${m[2]}-${m[3]} ${m[4]}:${m[5]}:${m[6]}${fracText}`;
  const aware = m[8] !== undefined || /Z$/.test(text.trim());
  if (!aware) return new Tagged("timestamp", "ts:" + us, base);
  const sign = m[8] === "-" ? -1n : 1n;
  const off = m[8] ? (BigInt(m[9]) * 3600n + BigInt(m[10] ?? 0) * 60n + BigInt(m[11] ?? 0)) * sign : 0n;
  const offText = m[8] ? `${m[8]}${m[9]}:${m[10] ?? "00"}${m[11] ? ":" + m[11] : ""}` : "+00:00";
  return new Tagged("timestamptz", "tz:" + (us - off * 1_000_000n), base + offText);
}

export function date(text) {
  return new Tagged("date", "d:" + String(text).trim(), String(text).trim());
}

export function time(text) {
  const m = /^(\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?$/.exec(String(text).trim());
  if (!m) return new Tagged("time", "t:" + text, String(text));
  const us = micros(m[4]);
  const shown = `${m[1]}:${m[2]}:${m[3] ?? "00"}` + (us ? "." + String(us).padStart(6, "0") : "");
  return new Tagged("time", "t:" + shown, shown);
}

/** An interval as a number of microseconds (months count 30 days, as psycopg loads them). */
export function interval(us) {
  const total = BigInt(us);
  const neg = total < 0n;
  let rest = neg ? -total : total;
  let days = rest / 86_400_000_000n;
  rest %= 86_400_000_000n;
  let text;
  if (neg) {
    // Python shows negative timedeltas as -N days plus a positive remainder
    days = -days - (rest ? 1n : 0n);
    rest = rest ? 86_400_000_000n - rest : 0n;
  }
  const secs = rest / 1_000_000n;
  const frac = rest % 1_000_000n;
  const clock = `${secs / 3600n}:${pad(String((secs / 60n) % 60n))}:${pad(String(secs % 60n))}`;
  text = (frac ? clock + "." + String(frac).padStart(6, "0") : clock);
  if (days) text = `${days} day${days === 1n || days === -1n ? "" : "s"}, ${text}`;
  return new Tagged("interval", "iv:" + total, text);
}

export function uuid(text) {
  const t = String(text).trim().toLowerCase();
  return new Tagged("uuid", "u:" + t, t);
}

// ---------------------------------------------------------------------------------------------
// numbers: exact values, the grid and the tolerant rule

function isNumber(v) {
  return typeof v === "bigint" || typeof v === "number" || v instanceof Decimal;
}

function roundHalfEven(y) {
  if (!Number.isFinite(y) || Number.isInteger(y)) return y;
  const f = Math.floor(y);
  const d = y - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function frexp(x) {
  let e = Math.floor(Math.log2(Math.abs(x))) + 1;
  let m = x / 2 ** e;
  while (Math.abs(m) >= 1) {
    e += 1;
    m = x / 2 ** e;
  }
  while (Math.abs(m) < 0.5) {
    e -= 1;
    m = x / 2 ** e;
  }
  return [m, e];
}

/** Grid key of a float: step 2**-20 below 1, 21 significant bits up to 2**21, then 1. */
function canonFloat(x) {
  if (-1 < x && x < 1) return roundHalfEven(x * TWO20) / TWO20;
  if (Number.isNaN(x)) return NaN;
  if (x === Infinity || x === -Infinity) return x;
  if (!(-TWO21 < x && x < TWO21)) return -EXACT_INT < x && x < EXACT_INT ? roundHalfEven(x) : x;
  const [m, e] = frexp(x);
  return roundHalfEven(m * TWO21) * 2 ** (e - 21);
}

function floatKey(k) {
  if (Number.isNaN(k)) return "nan";
  if (k === Infinity) return "inf";
  if (k === -Infinity) return "-inf";
  if (Number.isInteger(k)) return "n:" + BigInt(k).toString();
  return "n:" + String(k);
}

function isIntegralDecimal(d) {
  if (!d.finite) return false;
  if (d.exp >= 0 || d.coef === 0n) return true;
  return d.coef % 10n ** BigInt(-d.exp) === 0n;
}

function decimalBig(d) {
  // an integral Decimal as a bigint
  const v = d.exp >= 0 ? d.coef * 10n ** BigInt(d.exp) : d.coef / 10n ** BigInt(-d.exp);
  return d.neg ? -v : v;
}

/** Key of a non-integral number beyond the float range: 7 significant digits, half to even. */
function bigKey(d) {
  let digits = d.digits;
  let exp = d.exp;
  if (digits.length > 7) {
    const drop = digits.length - 7;
    let head = BigInt(digits.slice(0, 7));
    const tail = digits.slice(7);
    const half = "5" + "0".repeat(tail.length - 1);
    if (tail > half || (tail === half && head % 2n === 1n)) head += 1n;
    digits = head.toString();
    exp += drop;
  }
  const stripped = digits.replace(/0+$/, "");
  exp += digits.length - stripped.length;
  return "big:" + (d.neg ? "-" : "") + (stripped || "0") + "e" + exp;
}

function canonDecimal(d) {
  if (d.special === "nan") return "nan";
  if (d.special === "inf") return d.neg ? "-inf" : "inf";
  if (isIntegralDecimal(d)) return "n:" + decimalBig(d).toString();
  const f = Number(d.text);
  if (!Number.isFinite(f)) return bigKey(d);
  return floatKey(canonFloat(f));
}

/** Exact value of a number: {nan}, {inf: ±1} or {m, e} meaning m * 10**e. */
function exact(v) {
  if (typeof v === "bigint") return { m: v, e: 0 };
  if (v instanceof Decimal) {
    if (v.special === "nan") return { nan: true };
    if (v.special === "inf") return { inf: v.neg ? -1 : 1 };
    return { m: v.neg ? -v.coef : v.coef, e: v.exp };
  }
  if (Number.isNaN(v)) return { nan: true };
  if (v === Infinity || v === -Infinity) return { inf: v > 0 ? 1 : -1 };
  if (Number.isInteger(v)) return { m: BigInt(v), e: 0 };
  // a finite non-integral double is m * 2**-k: as a decimal, m * 5**k * 10**-k
  let k = 0;
  let x = v;
  while (!Number.isInteger(x)) {
    x *= 2;
    k += 1;
  }
  return { m: BigInt(x) * 5n ** BigInt(k), e: -k };
}

function alignExact(a, b) {
  const e = Math.min(a.e, b.e);
  return [a.m * 10n ** BigInt(a.e - e), b.m * 10n ** BigInt(b.e - e), e];
}

function cmpExact(a, b) {
  const [x, y] = alignExact(a, b);
  return x < y ? -1 : x > y ? 1 : 0;
}

function integral(v) {
  return typeof v === "bigint" || (v instanceof Decimal && isIntegralDecimal(v));
}

function finiteFloat(v) {
  const f = v instanceof Decimal ? Number(v.text) : Number(v);
  return Number.isFinite(f) ? f : null;
}

function bigAbs(x) {
  return x < 0n ? -x : x;
}

export function numClose(a, b) {
  const x = exact(a);
  const y = exact(b);
  if (x.nan || y.nan) return Boolean(x.nan && y.nan);
  if (x.inf || y.inf) return x.inf === y.inf;
  const ix = integral(a);
  const iy = integral(b);
  if (ix && iy) return cmpExact(x, y) === 0;
  const fx = finiteFloat(a);
  const fy = finiteFloat(b);
  if (fx !== null && fy !== null) {
    if (Math.abs(fx - fy) > REL_TOL * Math.max(1, Math.abs(fx), Math.abs(fy))) return false;
    if (ix || iy) {
      const [whole, other] = ix ? [fx, fy] : [fy, fx];
      if (-EXACT_INT < whole && whole < EXACT_INT) return roundHalfEven(other) === whole;
      return other === whole;
    }
    return true;
  }
  // beyond the float range: exact arithmetic on the decimal values (m units of 10**e)
  const [mx, my, e] = alignExact(x, y);
  const diff = bigAbs(mx - my);
  let scale = bigAbs(mx) > bigAbs(my) ? bigAbs(mx) : bigAbs(my);
  if (e >= 0) {
    // every value is a whole multiple of 10**e >= 1, so max(1, |x|, |y|) is the larger one
    if (diff === 0n) return true;
    if (ix || iy) return false;
    return diff * 1_000_000n <= scale;
  }
  const one = 10n ** BigInt(-e);
  if ((ix || iy) && 2n * diff > one) return false;
  if (one > scale) scale = one;
  return diff * 1_000_000n <= scale;
}

function numSortKey(v) {
  const x = exact(v);
  if (x.nan) return [1, null];
  return [0, x];
}

function cmpNumSortKey(a, b) {
  if (a[0] !== b[0]) return a[0] - b[0];
  if (a[0] === 1) return 0;
  const x = a[1];
  const y = b[1];
  if (x.inf || y.inf) {
    const sx = x.inf ?? 0;
    const sy = y.inf ?? 0;
    if (sx !== sy) return sx < sy ? -1 : 1;
    if (sx !== 0) return 0;
  }
  return cmpExact(x, y);
}

function rowSortKey(row) {
  return row.filter(isNumber).map(numSortKey);
}

function cmpRowSortKey(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = cmpNumSortKey(a[i], b[i]);
    if (c) return c;
  }
  return a.length - b.length;
}

// ---------------------------------------------------------------------------------------------
// keys

function isPlainObject(v) {
  return v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype;
}

function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The comparator's key for one value: equal keys imply equal values. */
export function canon(v) {
  if (v === null || v === undefined) return "N";
  switch (typeof v) {
    case "string":
      return "s:" + v;
    case "bigint":
      return "n:" + v.toString();
    case "number":
      return floatKey(canonFloat(v));
    case "boolean":
      return v ? "b:1" : "b:0";
    default:
      break;
  }
  if (v instanceof Decimal) return canonDecimal(v);
  if (v instanceof Tagged) return v.key;
  if (v instanceof Uint8Array) return "x:" + hex(v);
  if (Array.isArray(v)) return "L" + JSON.stringify(v.map(canon));
  if (isPlainObject(v)) {
    const items = Object.entries(v).map(([k, x]) => [canon(k), canon(x)]);
    items.sort((p, q) => (p[0] < q[0] ? -1 : p[0] > q[0] ? 1 : 0));
    return "D" + JSON.stringify(items);
  }
  return "O:" + String(v);
}

/** Like the key, but every number becomes the same placeholder. */
function coarse(v) {
  if (v === null || v === undefined || typeof v === "boolean") return canon(v);
  if (isNumber(v)) return "#";
  if (Array.isArray(v)) return "L" + JSON.stringify(v.map(coarse));
  if (isPlainObject(v)) {
    const items = Object.entries(v).map(([k, x]) => [canon(k), coarse(x)]);
    items.sort((p, q) => (p[0] < q[0] ? -1 : p[0] > q[0] ? 1 : 0));
    return "D" + JSON.stringify(items);
  }
  return canon(v);
}

/** What a signature counts: numbers by the float nearest their key, as the Python codes do. */
function code(key) {
  if (key.startsWith("n:")) {
    const f = Number(key.slice(2));
    return Number.isFinite(f) ? "f:" + (f === 0 ? 0 : f) : key;
  }
  return key;
}

function signature(codes) {
  return codes.length + "|" + JSON.stringify([...codes].sort());
}

function rowCodes(columns, n) {
  const out = new Array(n);
  for (let r = 0; r < n; r++) out[r] = JSON.stringify(columns.map((c) => c[r]));
  return out;
}

function isList(v) {
  return Array.isArray(v);
}

export function valueClose(a, b) {
  if (a === null || a === undefined || b === null || b === undefined) {
    return (a === null || a === undefined) && (b === null || b === undefined);
  }
  if (typeof a === "boolean" || typeof b === "boolean") return a === b;
  const an = isNumber(a);
  const bn = isNumber(b);
  if (an || bn) return an && bn && numClose(a, b);
  if (isList(a) || isList(b)) return isList(a) && isList(b) && rowClose(a, b);
  if (isPlainObject(a) || isPlainObject(b)) {
    if (!(isPlainObject(a) && isPlainObject(b))) return false;
    const ka = new Map(Object.entries(a).map(([k, x]) => [canon(k), x]));
    const kb = new Map(Object.entries(b).map(([k, x]) => [canon(k), x]));
    if (ka.size !== kb.size) return false;
    for (const [k, x] of ka) {
      if (!kb.has(k) || !valueClose(x, kb.get(k))) return false;
    }
    return true;
  }
  return canon(a) === canon(b);
}

function rowClose(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!valueClose(a[i], b[i])) return false;
  return true;
}

function numericProfile(col) {
  const nums = col.filter((v) => v !== null && v !== undefined);
  if (!nums.every(isNumber)) return null;
  const keyed = nums.map((v) => [numSortKey(v), v]);
  keyed.sort((p, q) => cmpNumSortKey(p[0], q[0]));
  return [col.length - nums.length, keyed.map((p) => p[1])];
}

// ---------------------------------------------------------------------------------------------
// messages (Python's repr, so the counterexamples read the same in both)

export function cap(text, limit = REPR_CAP) {
  if (text.length <= limit) return text;
  const chars = Array.from(text);
  return chars.length <= limit ? text : chars.slice(0, limit - 1).join("") + "…";
}

function pyStrRepr(s) {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += "\\" + quote;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) out += "\\x" + cp.toString(16).padStart(2, "0");
    else if (cp >= 0xd800 && cp < 0xe000) out += "\\u" + cp.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + quote;
}

function pyBytesRepr(bytes) {
  let s = "";
  let hasSingle = false;
  let hasDouble = false;
  for (const b of bytes) {
    if (b === 0x27) hasSingle = true;
    if (b === 0x22) hasDouble = true;
  }
  const quote = hasSingle && !hasDouble ? '"' : "'";
  for (const b of bytes) {
    if (b === 0x5c) s += "\\\\";
    else if (String.fromCharCode(b) === quote) s += "\\" + quote;
    else if (b === 0x0a) s += "\\n";
    else if (b === 0x0d) s += "\\r";
    else if (b === 0x09) s += "\\t";
    else if (b < 0x20 || b >= 0x7f) s += "\\x" + b.toString(16).padStart(2, "0");
    else s += String.fromCharCode(b);
  }
  return "b" + quote + s + quote;
}

/** Python's repr of a float. */
export function pyFloatRepr(x) {
  if (Number.isNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expText] = x.toExponential().split("e");
  const neg = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  const exp = Number(expText);
  let body;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) body = "0." + "0".repeat(-exp - 1) + digits;
    else if (digits.length > exp + 1) body = digits.slice(0, exp + 1) + "." + digits.slice(exp + 1);
    else body = digits + "0".repeat(exp + 1 - digits.length) + ".0";
  } else {
    const m = digits.length > 1 ? digits[0] + "." + digits.slice(1) : digits;
    body = m + "e" + (exp < 0 ? "-" : "+") + String(Math.abs(exp)).padStart(2, "0");
  }
  return (neg ? "-" : "") + body;
}

export function fmtValue(v, depth = 0) {
  if (depth > 4) return "…";
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "string") {
    const chars = Array.from(v);
    return pyStrRepr(chars.length > REPR_CAP ? chars.slice(0, REPR_CAP).join("") + "…" : v);
  }
  if (v instanceof Uint8Array) {
    return pyBytesRepr(v.subarray(0, REPR_CAP)) + (v.length > REPR_CAP ? "…" : "");
  }
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "bigint") return cap(v.toString());
  if (typeof v === "number") return cap(pyFloatRepr(v));
  if (v instanceof Decimal || v instanceof Tagged) return v.toString();
  if (Array.isArray(v)) return "[" + v.slice(0, 20).map((x) => fmtValue(x, depth + 1)).join(", ") + "]";
  if (isPlainObject(v)) {
    const inner = Object.entries(v)
      .slice(0, 20)
      .map(([k, x]) => `${fmtValue(k, depth + 1)}: ${fmtValue(x, depth + 1)}`)
      .join(", ");
    return "{" + inner + "}";
  }
  return cap(String(v));
}

export function fmtRow(row, depth = 0) {
  const parts = row.slice(0, 50).map((v) => fmtValue(v, depth));
  if (row.length > 50) parts.push("…");
  const body = parts.join(", ") + (parts.length === 1 ? "," : "");
  return cap("(" + body + ")");
}

// ---------------------------------------------------------------------------------------------
// search tools

function maxMatching(nLeft, adj) {
  const matchLeft = new Array(nLeft).fill(-1);
  const matchRight = new Map();
  for (let start = 0; start < nLeft; start++) {
    const parent = new Map();
    const queue = [start];
    let head = 0;
    let free = -1;
    while (head < queue.length && free < 0) {
      const u = queue[head++];
      for (const v of adj[u]) {
        if (parent.has(v)) continue;
        parent.set(v, u);
        const owner = matchRight.has(v) ? matchRight.get(v) : -1;
        if (owner < 0) {
          free = v;
          break;
        }
        queue.push(owner);
      }
    }
    let v = free;
    while (v >= 0) {
      const u = parent.get(v);
      const previous = matchLeft[u];
      matchLeft[u] = v;
      matchRight.set(v, u);
      v = u === start ? -1 : previous;
    }
  }
  return matchLeft;
}

function* assignments(cands, maxNodes) {
  const n = cands.length;
  if (n === 0) {
    yield [];
    return;
  }
  const seq = [...Array(n).keys()].sort((a, b) => cands[a].length - cands[b].length || a - b);
  const choice = new Array(n).fill(0);
  const current = new Array(n).fill(-1);
  const used = new Set();
  let level = 0;
  let nodes = 0;
  while (level >= 0) {
    const col = seq[level];
    const options = cands[col];
    if (current[col] >= 0) {
      used.delete(current[col]);
      current[col] = -1;
    }
    let placed = false;
    while (choice[level] < options.length) {
      const j = options[choice[level]];
      choice[level] += 1;
      nodes += 1;
      if (nodes > maxNodes) return;
      if (!used.has(j)) {
        used.add(j);
        current[col] = j;
        placed = true;
        break;
      }
    }
    if (!placed) {
      choice[level] = 0;
      level -= 1;
    } else if (level === n - 1) {
      yield [...current];
    } else {
      level += 1;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// one side's columns, computed on demand

class Side {
  constructor(rows, width) {
    this.rows = rows;
    this.n = rows.length;
    this.width = width;
    this._raw = new Map();
    this._keys = new Map();
    this._codes = new Map();
    this._sig = new Map();
  }
  raw(c) {
    if (!this._raw.has(c)) this._raw.set(c, this.rows.map((r) => r[c]));
    return this._raw.get(c);
  }
  keys(c) {
    if (!this._keys.has(c)) this._keys.set(c, this.raw(c).map(canon));
    return this._keys.get(c);
  }
  codes(c) {
    if (!this._codes.has(c)) this._codes.set(c, this.keys(c).map(code));
    return this._codes.get(c);
  }
  signature(c) {
    if (!this._sig.has(c)) this._sig.set(c, signature(this.codes(c)));
    return this._sig.get(c);
  }
}

function counter(keys, indices) {
  const out = new Map();
  if (indices === undefined) for (const k of keys) out.set(k, (out.get(k) ?? 0) + 1);
  else for (const i of indices) out.set(keys[i], (out.get(keys[i]) ?? 0) + 1);
  return out;
}

function sameCounts(a, b) {
  if (a.size !== b.size) return false;
  for (const [k, n] of a) if (b.get(k) !== n) return false;
  return true;
}

function range(start, end) {
  const out = new Array(Math.max(0, end - start));
  for (let i = start; i < end; i++) out[i - start] = i;
  return out;
}

function take(indices, keys, need) {
  const out = [];
  let remaining = 0;
  for (const n of need.values()) remaining += n;
  if (!remaining) return out;
  for (const i of indices) {
    const k = keys[i];
    const left = need.get(k);
    if (left) {
      need.set(k, left - 1);
      out.push(i);
      remaining -= 1;
      if (!remaining) break;
    }
  }
  return out;
}

function mappingTryCap(nRows, nCols) {
  const cells = Math.max(1, nRows * Math.max(1, nCols));
  return Math.max(2, Math.min(MAX_MAPPING_TRIES, Math.floor(MAPPING_CELL_BUDGET / cells)));
}

function cmpTuple(a, b) {
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i];
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return 0;
}

function arraysEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

class Matcher {
  constructor(gold, pred, gWidth, pWidth, order) {
    this.gold = gold;
    this.pred = pred;
    this.gWidth = gWidth;
    this.pWidth = pWidth;
    this.order = order;
    this.g = new Side(gold, gWidth);
    this.p = new Side(pred, pWidth);
    this.pairBudget = PAIR_BUDGET;
    this._gkeys = null;
    this._gcount = null;
    this._exact = new Map();
    this._coarseSig = new Map();
    this._profiles = new Map();
    this._runs = undefined;
  }

  // -- keys -------------------------------------------------------------------------------------

  rowKeys(cols, n) {
    const out = new Array(n);
    for (let r = 0; r < n; r++) out[r] = JSON.stringify(cols.map((c) => c[r]));
    return out;
  }
  goldKeys() {
    if (this._gkeys === null) this._gkeys = this.rowKeys(range(0, this.gWidth).map((c) => this.g.keys(c)), this.gold.length);
    return this._gkeys;
  }
  goldCount() {
    if (this._gcount === null) this._gcount = counter(this.goldKeys());
    return this._gcount;
  }
  predKeys(mapping) {
    return this.rowKeys(mapping.map((j) => this.p.keys(j)), this.pred.length);
  }
  aligned(j, mapping) {
    const row = this.pred[j];
    return mapping.map((m) => row[m]);
  }

  // -- exact test ---------------------------------------------------------------------------------

  runs() {
    if (!this.order || this.order.length === 0) return null;
    if (this._runs === undefined) {
      const n = this.gold.length;
      const out = new Array(n).fill(0);
      const cols = this.order.map((c) => this.g.keys(c));
      for (let r = 1; r < n; r++) {
        const change = cols.some((k) => k[r] !== k[r - 1]);
        out[r] = out[r - 1] + (change ? 1 : 0);
      }
      this._runs = out;
    }
    return this._runs;
  }

  exactlyEqual(mapping) {
    const id = mapping.join(",");
    if (!this._exact.has(id)) this._exact.set(id, this._exactlyEqual(mapping));
    return this._exact.get(id);
  }

  _exactlyEqual(mapping) {
    const gkeys = this.goldKeys();
    const pkeys = this.predKeys(mapping);
    if (this.order !== null) {
      if (arraysEqual(gkeys, pkeys)) return true;
      if (this.order.length === 0) return false;
      const runs = this.runs();
      const n = gkeys.length;
      let start = 0;
      for (let r = 1; r <= n; r++) {
        if (r === n || runs[r] !== runs[start]) {
          const span = range(start, r);
          if (!sameCounts(counter(gkeys, span), counter(pkeys, span))) return false;
          start = r;
        }
      }
      return true;
    }
    return sameCounts(counter(pkeys), this.goldCount());
  }

  // -- verification with the tolerance ------------------------------------------------------------

  verify(mapping) {
    const gkeys = this.goldKeys();
    const pkeys = this.predKeys(mapping);
    if (this.order !== null && arraysEqual(gkeys, pkeys)) return "";
    const pcount = counter(pkeys);
    if (!sameCounts(pcount, this.goldCount())) {
      const [missing, extra] = this.residue(range(0, gkeys.length), range(0, pkeys.length), gkeys, pkeys, mapping, pcount);
      if (missing.length || extra.length) {
        const parts = [];
        if (missing.length) parts.push(this.missingText(missing[0]));
        if (extra.length) parts.push(this.extraText(extra[0]));
        return parts.join("; ");
      }
    }
    if (this.order === null) return "";
    return this.checkOrder(gkeys, pkeys, mapping, true);
  }

  residue(gIdx, pIdx, gkeys, pkeys, mapping, pcount = null) {
    const whole = gIdx.length === gkeys.length && pIdx.length === pkeys.length;
    const gcount = whole ? this.goldCount() : counter(gkeys, gIdx);
    const pc = pcount ?? counter(pkeys, pIdx);
    const gNeed = new Map();
    const pNeed = new Map();
    for (const [k, n] of gcount) {
      const surplus = n - (pc.get(k) ?? 0);
      if (surplus > 0) gNeed.set(k, surplus);
    }
    for (const [k, n] of pc) {
      const surplus = (gcount.get(k) ?? 0) - n;
      if (surplus < 0) pNeed.set(k, -surplus);
    }
    const gLeft = take(gIdx, gkeys, gNeed);
    const pLeft = take(pIdx, pkeys, pNeed);
    if (!gLeft.length || !pLeft.length) return [gLeft, pLeft];
    if (gLeft.length > MAX_TOLERANT_ROWS || pLeft.length > MAX_TOLERANT_ROWS) return [gLeft, pLeft];
    return this.tolerantPairing(gLeft, pLeft, mapping);
  }

  tolerantPairing(gLeft, pLeft, mapping) {
    const groups = new Map();
    const group = (shape) => {
      if (!groups.has(shape)) groups.set(shape, [[], []]);
      return groups.get(shape);
    };
    for (const i of gLeft) group(JSON.stringify(this.gold[i].map(coarse)))[0].push(i);
    for (const j of pLeft) group(JSON.stringify(this.aligned(j, mapping).map(coarse)))[1].push(j);
    const gRest = [];
    const pRest = [];
    for (const [gGroup, pGroup] of groups.values()) {
      if (!gGroup.length || !pGroup.length) {
        gRest.push(...gGroup);
        pRest.push(...pGroup);
        continue;
      }
      const [gUn, pUn] = this.pairGroup(gGroup, pGroup, mapping);
      gRest.push(...gUn);
      pRest.push(...pUn);
    }
    gRest.sort((a, b) => a - b);
    pRest.sort((a, b) => a - b);
    return [gRest, pRest];
  }

  pairGroup(gGroup, pGroup, mapping) {
    const gRows = new Map(gGroup.map((i) => [i, this.gold[i]]));
    const pRows = new Map(pGroup.map((j) => [j, this.aligned(j, mapping)]));
    const gKey = new Map([...gRows].map(([i, r]) => [i, rowSortKey(r)]));
    const pKey = new Map([...pRows].map(([j, r]) => [j, rowSortKey(r)]));
    const gSorted = [...gGroup].sort((a, b) => cmpRowSortKey(gKey.get(a), gKey.get(b)));
    const pSorted = [...pGroup].sort((a, b) => cmpRowSortKey(pKey.get(a), pKey.get(b)));
    const limit = 2 * Math.floor(Math.sqrt(this.pairBudget)) + 2;
    let gUn = [];
    let pUn = [];
    let gi = 0;
    let pj = 0;
    while (gi < gSorted.length && pj < pSorted.length) {
      const i = gSorted[gi];
      const j = pSorted[pj];
      if (rowClose(gRows.get(i), pRows.get(j))) {
        gi += 1;
        pj += 1;
        continue;
      }
      if (cmpRowSortKey(gKey.get(i), pKey.get(j)) <= 0) {
        gUn.push(i);
        gi += 1;
      } else {
        pUn.push(j);
        pj += 1;
      }
      if (gUn.length + pUn.length > limit) break;
    }
    gUn = gUn.concat(gSorted.slice(gi));
    pUn = pUn.concat(pSorted.slice(pj));
    if (!gUn.length || !pUn.length) return [gUn, pUn];
    const cost = gUn.length * pUn.length;
    if (cost > this.pairBudget) return [gUn, pUn];
    this.pairBudget -= cost;
    const adj = gUn.map((i) => {
      const out = [];
      pUn.forEach((j, k) => {
        if (rowClose(gRows.get(i), pRows.get(j))) out.push(k);
      });
      return out;
    });
    const matched = maxMatching(gUn.length, adj);
    const taken = new Set(matched.filter((k) => k >= 0));
    return [gUn.filter((_, x) => matched[x] < 0), pUn.filter((_, k) => !taken.has(k))];
  }

  checkOrder(gkeys, pkeys, mapping, tolerant) {
    const n = gkeys.length;
    const cols = this.order ?? [];
    let first = n;
    for (let k = 0; k < n; k++) {
      if (gkeys[k] !== pkeys[k]) {
        first = k;
        break;
      }
    }
    if (!cols.length) {
      for (let k = first; k < n; k++) {
        if (gkeys[k] !== pkeys[k] && (!tolerant || !rowClose(this.gold[k], this.aligned(k, mapping)))) {
          return `order differs at row ${k + 1}: expected ${fmtRow(this.gold[k])}, got ${fmtRow(this.pred[k])}`;
        }
      }
      return "";
    }
    const sortKeys = cols.length === 1 ? this.g.keys(cols[0]) : this.rowKeys(cols.map((c) => this.g.keys(c)), n);
    let start = first;
    while (start > 0 && sortKeys[start - 1] === sortKeys[start]) start -= 1;
    const bounds = [start];
    for (let k = start + 1; k < n; k++) if (sortKeys[k] !== sortKeys[k - 1]) bounds.push(k);
    bounds.push(n);
    for (let b = 0; b + 1 < bounds.length; b++) {
      const s = bounds[b];
      const e = bounds[b + 1];
      if (!arraysEqual(gkeys.slice(s, e), pkeys.slice(s, e)) && !this.runOk(s, e, gkeys, pkeys, mapping, tolerant)) {
        return this.orderText(s, e, gkeys, pkeys, mapping);
      }
    }
    return "";
  }

  runOk(start, end, gkeys, pkeys, mapping, tolerant) {
    const span = range(start, end);
    if (!tolerant) return sameCounts(counter(gkeys, span), counter(pkeys, span));
    if (end - start === 1) return rowClose(this.gold[start], this.aligned(start, mapping));
    const [missing, extra] = this.residue(span, span, gkeys, pkeys, mapping);
    return !missing.length && !extra.length;
  }

  orderText(start, end, gkeys, pkeys, mapping) {
    const cols = this.order ?? [];
    const expected = cols.map((c) => this.gold[start][c]);
    for (let k = start; k < end; k++) {
      const gotRow = this.aligned(k, mapping);
      const got = cols.map((c) => gotRow[c]);
      if (!rowClose(expected, got)) {
        return `order differs at row ${k + 1}: expected a row with keys ${fmtRow(expected)}, got ${fmtRow(got)}`;
      }
    }
    const span = range(start, end);
    const [missing, extra] = this.residue(span, span, gkeys, pkeys, mapping);
    const where = end - start === 1 ? `row ${start + 1}` : `rows ${start + 1}-${end}`;
    const parts = [`order differs in ${where} (sort keys ${fmtRow(expected)})`];
    if (missing.length) parts.push(this.missingText(missing[0]));
    if (extra.length) parts.push(this.extraText(extra[0]));
    return parts.join("; ");
  }

  missingText(i) {
    return `first missing row (in gold, not predicted): ${fmtRow(this.gold[i])}`;
  }
  extraText(j) {
    return `first extra row (predicted, not in gold): ${fmtRow(this.pred[j])}`;
  }

  sampleValues(col) {
    const seen = new Set();
    const shown = [];
    let more = false;
    const raw = this.g.raw(col);
    const keys = this.g.keys(col);
    for (let r = 0; r < raw.length; r++) {
      if (seen.has(keys[r])) continue;
      if (shown.length === 3) {
        more = true;
        break;
      }
      seen.add(keys[r]);
      shown.push(fmtValue(raw[r]));
    }
    return cap(shown.join(", ") + (more ? ", ..." : ""), 120);
  }

  // -- driver -------------------------------------------------------------------------------------

  run() {
    const nGold = this.gold.length;
    const nPred = this.pred.length;
    if (nGold !== nPred) {
      const mapping = this.diagnosticMapping();
      const [missing, extra] = this.residue(range(0, nGold), range(0, nPred), this.goldKeys(), this.predKeys(mapping), mapping);
      let text = `row counts differ: gold ${nGold}, predicted ${nPred}`;
      if (missing.length) text += "; " + this.missingText(missing[0]);
      else if (extra.length) text += "; " + this.extraText(extra[0]);
      return text;
    }
    if (this.gWidth === this.pWidth && this.exactlyEqual(range(0, this.gWidth))) return "";
    const tryCap = mappingTryCap(nGold, this.pWidth);
    const tried = new Set();
    let firstReason = "";
    let unmatched = null;
    let previous = null;
    for (const looseEverywhere of [false, true]) {
      const cands = this.candidates(looseEverywhere);
      const asText = JSON.stringify(cands);
      if (asText === previous) break;
      previous = asText;
      const missingCol = this.infeasibleColumn(cands);
      if (missingCol !== null) {
        unmatched = unmatched ?? missingCol;
        if (!cands[missingCol].length) break;
        continue;
      }
      const batch = [];
      for (const mapping of assignments(cands, MAX_SEARCH_NODES)) {
        if (tried.size >= tryCap) break;
        const id = mapping.join(",");
        if (!tried.has(id)) {
          tried.add(id);
          batch.push(mapping);
        }
      }
      if (batch.some((m) => this.exactlyEqual(m))) return "";
      const rescue = nGold * this.pWidth <= SMALL_CELLS ? batch.length : TOLERANT_TRIES;
      for (const mapping of batch.slice(0, rescue)) {
        const reason = this.verify(mapping);
        if (!reason) return "";
        firstReason = firstReason || reason;
      }
    }
    if (firstReason) return firstReason;
    const mapping = this.diagnosticMapping();
    const [missing, extra] = this.residue(range(0, nGold), range(0, nPred), this.goldKeys(), this.predKeys(mapping), mapping);
    const parts = [];
    if (this.gWidth > 1 || !(missing.length || extra.length)) {
      const col = unmatched ?? 0;
      parts.push(`no column of the prediction matches gold column ${col + 1} (values like ${this.sampleValues(col)})`);
    }
    if (missing.length) parts.push(this.missingText(missing[0]));
    if (extra.length && this.gWidth === 1) parts.push(this.extraText(extra[0]));
    return parts.join("; ");
  }

  // -- column candidates ----------------------------------------------------------------------------

  candidates(looseEverywhere) {
    const gsig = range(0, this.gWidth).map((c) => this.g.signature(c));
    const psig = range(0, this.pWidth).map((j) => this.p.signature(j));
    const bySig = new Map();
    psig.forEach((s, j) => {
      if (!bySig.has(s)) bySig.set(s, []);
      bySig.get(s).push(j);
    });
    const exactC = gsig.map((s) => [...(bySig.get(s) ?? [])]);
    const cands = exactC.map((found, i) => {
      if (!found.length || looseEverywhere) {
        const extra = range(0, this.pWidth).filter((j) => !found.includes(j) && this.looseMatch(i, j));
        return found.concat(extra);
      }
      return found;
    });
    this.rank(cands, exactC);
    return cands;
  }

  rank(cands, exactC) {
    const anchors = [];
    exactC.forEach((c, i) => {
      if (c.length === 1) anchors.push([i, c[0]]);
    });
    const n = this.gold.length;
    const pCache = new Map();
    let anchorCodes = null;
    cands.forEach((found, i) => {
      if (found.length < 2) return;
      const agree = new Set();
      if (anchors.length && exactC[i].length > 1) {
        if (anchorCodes === null) {
          anchorCodes = [
            rowCodes(anchors.map(([a]) => this.g.codes(a)), n),
            rowCodes(anchors.map(([, b]) => this.p.codes(b)), n),
          ];
        }
        const [gAnchor, pAnchor] = anchorCodes;
        const target = signature(rowCodes([gAnchor, this.g.codes(i)], n));
        for (const j of exactC[i]) {
          if (!pCache.has(j)) pCache.set(j, signature(rowCodes([pAnchor, this.p.codes(j)], n)));
          if (pCache.get(j) === target) agree.add(j);
        }
      }
      const exactSet = new Set(exactC[i]);
      const key = (j) => [agree.has(j) ? 0 : 1, exactSet.has(j) ? 0 : 1, Math.abs(j - i), j];
      found.sort((a, b) => cmpTuple(key(a), key(b)));
    });
  }

  coarseSignature(side, col) {
    const id = side + col;
    if (!this._coarseSig.has(id)) {
      const raw = side === "g" ? this.g.raw(col) : this.p.raw(col);
      this._coarseSig.set(id, signature(raw.map(coarse).map(code)));
    }
    return this._coarseSig.get(id);
  }

  profile(side, col) {
    const id = side + col;
    if (!this._profiles.has(id)) {
      const raw = side === "g" ? this.g.raw(col) : this.p.raw(col);
      this._profiles.set(id, numericProfile(raw));
    }
    return this._profiles.get(id);
  }

  looseMatch(i, j) {
    if (this.coarseSignature("g", i) !== this.coarseSignature("p", j)) return false;
    const gp = this.profile("g", i);
    if (gp === null) return true;
    const pp = this.profile("p", j);
    if (pp === null || gp[0] !== pp[0] || gp[1].length !== pp[1].length) return false;
    for (let k = 0; k < gp[1].length; k++) if (!numClose(gp[1][k], pp[1][k])) return false;
    return true;
  }

  infeasibleColumn(cands) {
    const matched = maxMatching(cands.length, cands);
    const at = matched.findIndex((j) => j < 0);
    return at < 0 ? null : at;
  }

  diagnosticMapping() {
    const gsig = range(0, this.gWidth).map((c) => this.g.signature(c));
    const psig = range(0, this.pWidth).map((j) => this.p.signature(j));
    const pairs = Math.max(1, this.gWidth * this.pWidth);
    const sample = Math.max(DIAG_MIN_SAMPLE, Math.floor(DIAG_CELL_BUDGET / pairs));
    const gSets = range(0, this.gWidth).map((c) => new Set(this.g.keys(c).slice(0, sample)));
    const pSets = range(0, this.pWidth).map((j) => new Set(this.p.keys(j).slice(0, sample)));
    const scored = [];
    gSets.forEach((gSet, i) => {
      pSets.forEach((pSet, j) => {
        let common = 0;
        for (const k of gSet) if (pSet.has(k)) common += 1;
        const overlap = common / Math.max(1, gSet.size + pSet.size - common);
        scored.push([gsig[i] !== psig[j] ? 1 : 0, -overlap, Math.abs(i - j), i, j]);
      });
    });
    scored.sort(cmpTuple);
    const mapping = new Array(this.gWidth).fill(-1);
    const used = new Set();
    for (const [, , , i, j] of scored) {
      if (mapping[i] < 0 && !used.has(j)) {
        mapping[i] = j;
        used.add(j);
      }
    }
    return mapping;
  }
}

// ---------------------------------------------------------------------------------------------
// entry point

function width(rows) {
  const widths = new Set(rows.map((r) => r.length));
  if (widths.size > 1) return null;
  return widths.size ? [...widths][0] : 0;
}

function normaliseOrder(order, w) {
  if (order === null || order === undefined) return null;
  if (!Array.isArray(order)) return [];
  for (const k of order) if (!Number.isInteger(k) || k < 0 || k >= w) return [];
  return [...order];
}

function compareRows(gold, pred, order, superset) {
  const gw = width(gold);
  const pw = width(pred);
  if (gw !== null && pw !== null && gold.length === 0 && pred.length === 0) return "";
  if (gw === null) return "gold rows do not all have the same number of columns";
  if (pw === null) return "predicted rows do not all have the same number of columns";
  const nGold = gold.length;
  const nPred = pred.length;
  if (nGold === 0) {
    return `row counts differ: gold 0, predicted ${nPred}; first extra row (predicted, not in gold): ${fmtRow(pred[0])}`;
  }
  if (nPred === 0) {
    return `row counts differ: gold ${nGold}, predicted 0; first missing row (in gold, not predicted): ${fmtRow(gold[0])}`;
  }
  if (pw < gw || (pw !== gw && !superset)) {
    let text = `column count differs: gold ${gw}, predicted ${pw}`;
    if (nGold !== nPred) text += ` (row counts differ too: gold ${nGold}, predicted ${nPred})`;
    return text;
  }
  return new Matcher(gold, pred, gw, pw, normaliseOrder(order, gw)).run();
}

/**
 * Compare a predicted result set with the gold one: {equal, reason, goldRows, predRows}.
 * `order`: null (a multiset), gold column indices (ORDER BY runs), or [] (the exact sequence).
 * Never throws: anything unexpected is an unequal result with a reason.
 */
export function compare(gold, pred, { order = null, superset = false } = {}) {
  const nGold = Array.isArray(gold) ? gold.length : 0;
  const nPred = Array.isArray(pred) ? pred.length : 0;
  let reason;
  try {
    if (!Array.isArray(gold) || !Array.isArray(pred)) throw new TypeError("the rows are not a list");
    for (const rows of [gold, pred]) {
      rows.forEach((r, i) => {
        if (!Array.isArray(r)) throw new TypeError(`row ${i + 1} is not a sequence`);
      });
    }
    reason = compareRows(gold, pred, order, superset);
  } catch (exc) {
    reason = cap(`results could not be compared (${exc?.name ?? "Error"}: ${exc?.message ?? exc})`);
  }
  return { equal: !reason, reason, goldRows: nGold, predRows: nPred };
}
