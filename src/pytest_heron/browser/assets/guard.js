// The statement guard of the browser runner: exactly one read-only query, or a reason.
//
// The Python guard (pytest_heron.sandbox.statement) parses with sqlglot; there is no sqlglot
// here, so this one tokenizes PostgreSQL text and judges the tokens, and is stricter wherever it
// cannot tell: it accepts only what the Python guard accepts (tests/data/guard_cases.json holds
// both to that). What it cannot see (a statement that is not valid SQL at all) is left to
// PostgreSQL, and every statement runs in a READ ONLY transaction that is rolled back, so even a
// statement that slipped through could not write.
//
// checkStatement(sql) -> null when accepted, else {kind, reason}; it never throws.

export const MAX_SQL_CHARS = 100_000;
const MAX_PAREN_DEPTH = 24; // the Python guard gives up somewhere past 40 (its recursion limit)
const MAX_BRACKET_DEPTH = 6;

// Keywords that make a statement more than a read wherever they appear outside quotes (a
// data-modifying WITH, SELECT INTO, a row lock), and a few that have no place in a query at all.
// Statement keywords such as BEGIN or VACUUM are refused by the first-word rule already.
const WRITES = new Set(
  "INSERT UPDATE DELETE MERGE INTO LOCK SET CREATE DROP ALTER TRUNCATE COPY GRANT REVOKE".split(" "),
);
const QUERY_STARTS = new Set(["SELECT", "WITH", "VALUES"]);

class TokenError extends Error {}

function tokenize(sql) {
  const tokens = [];
  const n = sql.length;
  let i = 0;
  const push = (type, text) => tokens.push({ type, text });
  while (i < n) {
    const ch = sql[i];
    if (/\s/.test(ch)) {
      i += 1;
      continue;
    }
    if (ch === "-" && sql[i + 1] === "-") {
      // PostgreSQL's scanner ends a -- comment at a newline or a carriage return (scan.l:
      // non_newline is [^\n\r]): "--\r" must not hide what follows it
      i += 2;
      while (i < n && sql[i] !== "\n" && sql[i] !== "\r") i += 1;
      continue;
    }
    if (ch === "/" && sql[i + 1] === "*") {
      let depth = 1;
      i += 2;
      while (depth > 0) {
        if (i >= n) throw new TokenError("an unterminated /* comment");
        if (sql[i] === "/" && sql[i + 1] === "*") {
          depth += 1;
          i += 2;
        } else if (sql[i] === "*" && sql[i + 1] === "/") {
          depth -= 1;
          i += 2;
        } else i += 1;
      }
      continue;
    }
    const prefixed = /^(?:[eEbBxXnN]|[uU]&)'/.exec(sql.slice(i, i + 3));
    if (ch === "'" || prefixed) {
      const escapes = prefixed !== null && /^[eE]/.test(prefixed[0]);
      i += prefixed ? prefixed[0].length : 1;
      for (;;) {
        if (i >= n) throw new TokenError("an unterminated string");
        if (escapes && sql[i] === "\\") i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") break;
        else i += 1;
      }
      i += 1;
      push("string", "");
      continue;
    }
    if (ch === '"' || (/[uU]/.test(ch) && sql.slice(i + 1, i + 3) === '&"')) {
      i += ch === '"' ? 1 : 3;
      for (;;) {
        if (i >= n) throw new TokenError("an unterminated quoted name");
        if (sql[i] === '"' && sql[i + 1] === '"') i += 2;
        else if (sql[i] === '"') break;
        else i += 1;
      }
      i += 1;
      push("name", "");
      continue;
    }
    if (ch === "$") {
      const tag = /^\$([A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$/.exec(sql.slice(i, i + 200));
      if (tag) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        if (end < 0) throw new TokenError("an unterminated dollar quote");
        i = end + tag[0].length;
        push("string", "");
        continue;
      }
      const param = /^\$\d+/.exec(sql.slice(i, i + 20));
      if (param) {
        i += param[0].length;
        push("param", param[0]);
        continue;
      }
      throw new TokenError("a stray $");
    }
    const word = /^[A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*/.exec(sql.slice(i, i + 200));
    if (word) {
      i += word[0].length;
      push("word", word[0].toUpperCase());
      continue;
    }
    const num = /^(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/.exec(sql.slice(i, i + 400));
    if (num) {
      i += num[0].length;
      push("number", num[0]);
      continue;
    }
    if ("()[],;".includes(ch)) {
      i += 1;
      push("punct", ch);
      continue;
    }
    const op = /^[+\-*/<>=~!@#%^&|`?:.]+/.exec(sql.slice(i, i + 50));
    if (op) {
      i += op[0].length;
      push("op", op[0]);
      continue;
    }
    throw new TokenError(`an unexpected character ${JSON.stringify(ch)}`);
  }
  return tokens;
}

function loneSurrogate(sql) {
  const m = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.exec(sql);
  return m ? m.index : -1;
}

const reject = (kind, reason) => ({ kind, reason });

export function checkStatement(sql) {
  try {
    return check(sql);
  } catch (exc) {
    return reject("parse", `the SQL could not be checked (${exc?.message ?? exc})`);
  }
}

function check(sql) {
  if (typeof sql !== "string") return reject("type", `the SQL is not text but ${typeof sql}`);
  if (sql.length > MAX_SQL_CHARS) {
    return reject("length", `the SQL is ${sql.length.toLocaleString("en")} characters long, over the limit of ${MAX_SQL_CHARS.toLocaleString("en")}; it was not parsed`);
  }
  if (sql.includes("\u0000")) return reject("nul", "the SQL contains a NUL byte");
  const bad = loneSurrogate(sql);
  if (bad >= 0) {
    const cp = sql.charCodeAt(bad).toString(16).toUpperCase();
    return reject("encoding", `the SQL is not valid Unicode text (code point U+${cp} at character ${bad} cannot be encoded as UTF-8)`);
  }
  let tokens;
  try {
    tokens = tokenize(sql);
  } catch (exc) {
    if (exc instanceof TokenError) {
      return reject("tokenize", `the SQL does not tokenize as PostgreSQL (an unterminated string, quoted name, dollar quote or comment?): ${exc.message}`);
    }
    throw exc;
  }
  const statements = [];
  let current = [];
  for (const t of tokens) {
    if (t.type === "punct" && t.text === ";") {
      if (current.length) statements.push(current);
      current = [];
    } else current.push(t);
  }
  if (current.length) statements.push(current);
  if (statements.length !== 1) return reject("statements", `expected exactly one statement, got ${statements.length}`);
  const stmt = statements[0];
  let at = 0;
  while (at < stmt.length && stmt[at].type === "punct" && stmt[at].text === "(") at += 1;
  const head = stmt[at];
  if (!head || head.type !== "word" || !QUERY_STARTS.has(head.text)) {
    const what = head && head.type === "word" ? head.text : "that";
    return reject("not_a_query", `only a SELECT, WITH, VALUES or set operation is accepted, not ${what}`);
  }
  let parens = 0;
  let brackets = 0;
  for (let k = 0; k < stmt.length; k++) {
    const t = stmt[k];
    if (t.type === "punct") {
      if (t.text === "(") parens += 1;
      else if (t.text === ")") parens -= 1;
      else if (t.text === "[") brackets += 1;
      else if (t.text === "]") brackets -= 1;
      if (parens < 0 || brackets < 0) return reject("parse", "the SQL does not parse as PostgreSQL: unbalanced brackets");
      if (parens > MAX_PAREN_DEPTH || brackets > MAX_BRACKET_DEPTH) return reject("nesting", "the SQL is nested too deeply to check");
    } else if (t.type === "word") {
      if (WRITES.has(t.text)) {
        return reject("writes", `the query contains a ${t.text} clause, which could change data`);
      }
      const next = stmt[k + 1];
      if (t.text === "FOR" && next && next.type === "word" && ["SHARE", "KEY", "NO"].includes(next.text)) {
        return reject("writes", "the query contains a LOCK clause, which could change data");
      }
    } else if (t.type === "param") {
      return reject("parse", "the SQL has a $n parameter, which nothing would fill in");
    }
  }
  if (parens !== 0 || brackets !== 0) return reject("parse", "the SQL does not parse as PostgreSQL: unbalanced brackets");
  return null;
}
