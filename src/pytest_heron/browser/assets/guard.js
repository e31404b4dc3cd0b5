// The statement guard of the browser runner: exactly one read-only query, or a reason.
//
// It decides as the Python guard's PostgreSQL half (pytest_heron.sandbox.statement,
// _check_postgres) does, on the same parser: libpg_query for PostgreSQL 16, here the WebAssembly
// build of the npm package libpg-query (vendored into the runner, see browser/vendor.py), there
// pglast. Where a comment ends, how a string or dollar quote closes, how many statements there
// are and which clauses could write or lock is what PostgreSQL's grammar says, not a tokeniser's
// guess. The tree is judged as the Python guard judges it: on its JSON text, by the same two
// patterns, with the same reasons word for word. The Python guard also asks sqlglot (its second
// opinion, which the browser has not); a statement only sqlglot refuses is left to PGlite, and
// every statement runs in a READ ONLY transaction that is rolled back. tests/data/guard_cases.json
// and tests/test_js_guard.py hold the two guards to this.
//
// startGuard(factory) starts loading the parser (factory: a promise of the Emscripten module
// factory of libpg-query.js); checkStatement(sql) waits for it, then resolves to null when the
// statement is accepted, else to {kind, reason}. It never rejects (throws).

export const MAX_SQL_CHARS = 100_000;

// keys of PostgreSQL's parse tree (as JSON) that write or lock, anywhere (as _PG_WRITES)
export const WRITES = {
  InsertStmt: "INSERT",
  UpdateStmt: "UPDATE",
  DeleteStmt: "DELETE",
  MergeStmt: "MERGE",
  intoClause: "INTO",
  lockingClause: "FOR UPDATE/SHARE",
};
// A key in the JSON text: inside a JSON string a quote is escaped, so `"name":` cannot come from
// a string literal of the SQL. The text is searched, not parsed: a long UNION ALL chain nests
// deeper than a recursive walk should go.
const WRITE_KEY = new RegExp(`"(${Object.keys(WRITES).join("|")})":`);
const FIRST_KIND = /^\{"version":\d+,"stmts":\[\{"stmt":\{"(\w+)":/;

let factory = null; // a promise of the Emscripten module factory
let parser = null; // a promise of the instantiated module

/** Start loading the parser; checkStatement waits for it. */
export function startGuard(makeFactory) {
  factory = Promise.resolve(makeFactory);
  parser = instantiate();
}

function instantiate() {
  const module = factory.then((make) => make());
  module.catch(() => {}); // a failure is reported by the check that awaits it
  return module;
}

const reject = (kind, reason) => ({ kind, reason });

export async function checkStatement(sql) {
  try {
    const early = checkText(sql);
    if (early !== undefined) return early;
    if (parser === null) return reject("parse", "the SQL could not be parsed (the guard's parser was not started)");
    let module;
    try {
      module = await parser;
    } catch (exc) {
      parser = instantiate(); // the next statement tries to load it again
      return reject("parse", `the SQL could not be parsed (its parser did not load: ${exc?.message ?? exc})`);
    }
    return judge(sql, module);
  } catch (exc) {
    return reject("parse", `the SQL could not be parsed (${exc?.name ?? "Error"}: ${firstLine(String(exc?.message ?? exc), "")})`);
  }
}

/** What the Python guard checks before parsing: type, length, NUL bytes, encoding. */
function checkText(sql) {
  if (typeof sql !== "string") return reject("type", `the SQL is not text but ${typeof sql}`);
  if (sql.length > MAX_SQL_CHARS) {
    return reject("length", `the SQL is ${sql.length.toLocaleString("en")} characters long, over the limit of ${MAX_SQL_CHARS.toLocaleString("en")}; it was not parsed`);
  }
  if (sql.includes("\u0000")) return reject("nul", "the SQL contains a NUL byte");
  const bad = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.exec(sql);
  if (bad !== null) {
    const cp = sql.charCodeAt(bad.index).toString(16).toUpperCase().padStart(4, "0");
    return reject("encoding", `the SQL is not valid Unicode text (code point U+${cp} at character ${codePoints(sql.slice(0, bad.index)).toLocaleString("en")} cannot be encoded as UTF-8)`);
  }
  return undefined;
}

function judge(sql, module) {
  let parsed;
  try {
    parsed = parse(module, sql);
  } catch (exc) {
    // the engine's stack ran out inside the parser (or the module failed otherwise): this
    // instance may be left half-way, so the next statement gets a fresh one
    parser = instantiate();
    if (exc instanceof RangeError) return reject("nesting", "the SQL is nested too deeply to parse");
    throw exc;
  }
  if (parsed.error !== undefined) {
    const text = firstLine(parsed.error, "syntax error");
    if (text.includes("unterminated")) {
      return reject("tokenize", `the SQL does not tokenize as PostgreSQL (an unterminated string, quoted name, dollar quote or comment?): ${text}`);
    }
    if (text.includes("stack depth")) return reject("nesting", "the SQL is nested too deeply to parse");
    return reject("parse", `the SQL does not parse as PostgreSQL: ${text}`);
  }
  const tree = parsed.tree;
  const count = statementCount(tree);
  if (count !== 1) return reject("statements", `expected exactly one statement, got ${count}`);
  const kind = FIRST_KIND.exec(tree)?.[1] ?? "";
  if (kind !== "SelectStmt") {
    const name = kind.replace(/Stmt$/, "").toUpperCase() || "an unknown statement";
    return reject("not_a_query", `only a SELECT, WITH, VALUES or set operation is accepted, not ${name}`);
  }
  const found = WRITE_KEY.exec(tree);
  if (found !== null) return reject("writes", `the query contains a ${WRITES[found[1]]} clause, which could change data`);
  return null;
}

/**
 * libpg_query's pg_query_parse through the module's C entry points: {tree} (the JSON text) or
 * {error} (the message as pglast's ParseError prints it, with its index).
 */
function parse(m, sql) {
  const size = m.lengthBytesUTF8(sql) + 1;
  const text = m._malloc(size);
  let result = 0;
  try {
    m.stringToUTF8(sql, text, size);
    result = m._wasm_parse_query_raw(text);
    // struct {char *parse_tree; char *stderr_buffer; PgQueryError *error}, and the error is
    // struct {char *message; char *funcname; char *filename; int lineno; int cursorpos; ...}
    const error = m.getValue(result + 8, "i32");
    if (error) {
      const message = m.UTF8ToString(m.getValue(error, "i32"));
      const at = errorIndex(sql, m.getValue(error + 16, "i32") - 1);
      return { error: at === null ? message : `${message}, at index ${at}` };
    }
    return { tree: m.UTF8ToString(m.getValue(result, "i32")) };
  } finally {
    m._free(text);
    if (result) m._wasm_free_parse_result(result);
  }
}

/**
 * pglast's Displacements: the cursor position taken as a UTF-8 byte offset, turned into the
 * index of the code point holding that byte; null when it lies outside the text.
 */
function errorIndex(sql, offset) {
  let bytes = 0;
  let index = 0;
  for (const ch of sql) {
    const cp = ch.codePointAt(0);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (offset >= 0 && offset < bytes) return index;
    index += 1;
  }
  return null;
}

/** The number of entries of the top-level "stmts" array, read without building the tree. */
function statementCount(tree) {
  if (tree === "") return 0; // what libpg_query gives for an empty text
  const opening = /^\{"version":\d+,"stmts":\[/.exec(tree);
  if (opening === null) throw new Error("the parse tree has no statement list");
  let depth = 0;
  let count = 0;
  for (let i = opening[0].length; i < tree.length; i++) {
    const ch = tree[i];
    if (ch === '"') {
      for (i += 1; i < tree.length && tree[i] !== '"'; i += tree[i] === "\\" ? 2 : 1);
    } else if (ch === "{" || ch === "[") {
      if (depth === 0) count += 1;
      depth += 1;
    } else if (ch === "}" || ch === "]") {
      if (depth === 0) return count;
      depth -= 1;
    }
  }
  throw new Error("the parse tree's JSON ends early");
}

/** Python's _first_line: the first line of the text (or the default), at most 300 code points. */
function firstLine(text, fallback) {
  const stripped = text.trim();
  const line = stripped ? stripped.split(/\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/)[0] : fallback;
  return Array.from(line).slice(0, 300).join("");
}

function codePoints(text) {
  return Array.from(text).length;
}
