// The JavaScript guard on every shared statement (tests/data/guard_cases.json), on its parser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { checkStatement, factory, startGuard } from "./parser.mjs";

const { cases } = JSON.parse(readFileSync(new URL("../data/guard_cases.json", import.meta.url), "utf8"));

export function caseSql(c) {
  if (c.sql !== undefined) return c.sql;
  return c.sql_repeat
    .reduce((out, item, k, all) => (k % 2 === 0 ? out + item.repeat(all[k + 1]) : out), "");
}

cases.forEach((c, k) => {
  const sql = caseSql(c);
  const expected = c.js ?? c.python;
  test(`guard case ${k}: ${JSON.stringify(sql.slice(0, 60))} -> ${expected}`, async () => {
    const verdict = await checkStatement(sql);
    const kind = verdict === null ? "accepted" : verdict.kind;
    assert.equal(kind, expected, verdict?.reason);
    if (verdict !== null) assert.ok(verdict.reason.length > 0);
  });
});

test("the guard never throws on odd input", async () => {
  for (const odd of [undefined, null, 5, {}, "\\", "$", "$$", "E'\\", "U&\"x", "/*/", "'''"]) {
    const verdict = await checkStatement(odd);
    assert.ok(verdict !== null && typeof verdict.reason === "string");
  }
});

test("after the engine's stack runs out inside the parser, the next statement is judged afresh", async () => {
  const deep = `SELECT ${"(SELECT ".repeat(3000)}1${")".repeat(3000)}`; // as case 181
  assert.equal((await checkStatement(deep))?.kind, "nesting");
  assert.equal(await checkStatement("SELECT 1"), null);
  assert.equal((await checkStatement("SELECT 1; SELECT 2"))?.kind, "statements");
});

test("a parser that does not load refuses every statement, and a later start is used", async () => {
  startGuard(Promise.reject(new Error("libpg-query.js did not load")));
  const verdict = await checkStatement("SELECT 1");
  assert.equal(verdict?.kind, "parse");
  assert.match(verdict.reason, /its parser did not load: libpg-query.js did not load/);
  startGuard(factory);
  assert.equal(await checkStatement("SELECT 1"), null);
});
