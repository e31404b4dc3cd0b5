// The JavaScript comparator on every shared hand-written case (tests/data/compare_cases.json):
// the same verdict as the Python one, and the same counterexample text where a case names it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Decimal, compare, fmtValue, pyFloatRepr } from "../../src/pytest_heron/browser/assets/compare.js";
import { decodeRows } from "./wire.mjs";

const { cases } = JSON.parse(readFileSync(new URL("../data/compare_cases.json", import.meta.url), "utf8"));

for (const c of cases) {
  if (c.python_only) continue;
  test(`case: ${c.name}`, () => {
    const gold = decodeRows(c.gold);
    const pred = decodeRows(c.pred);
    const options = {};
    if ("order" in c) options.order = c.order;
    if (c.superset) options.superset = true;
    const result = compare(gold, pred, options);
    assert.equal(result.equal, c.equal, result.reason);
    assert.equal(result.goldRows, gold.length);
    assert.equal(result.predRows, pred.length);
    if (c.equal) assert.equal(result.reason, "");
    else assert.ok(result.reason.length > 0 && result.reason.length < 700);
    for (const text of c.mentions ?? []) assert.ok(result.reason.includes(text), `${JSON.stringify(text)} not in ${JSON.stringify(result.reason)}`);
  });
}

test("every case is run, bar the ones marked Python-only", () => {
  assert.ok(cases.filter((c) => !c.python_only).length >= 100);
});

test("floats are shown as Python shows them", () => {
  const shown = [1.0, 0.1, 1e16, 1.5e-7, 123456789.125, -0.0, 1e-4, 12345678901234567.0].map(pyFloatRepr);
  assert.deepEqual(shown, ["1.0", "0.1", "1e+16", "1.5e-07", "123456789.125", "-0.0", "0.0001", "1.2345678901234568e+16"]);
});

test("numerics are shown as Python's Decimal shows them", () => {
  const shown = ["12.50", "1e400", "0.0000001", "-3", "1.000E+5", "NaN", "-Infinity"].map((t) => fmtValue(new Decimal(t)));
  assert.deepEqual(shown, ["12.50", "1E+400", "1E-7", "-3", "1.000E+5", "NaN", "-Infinity"]);
});

test("a reason is capped", () => {
  const long = "x".repeat(10_000);
  const result = compare([[long, 1n]], [[long, 2n]]);
  assert.equal(result.equal, false);
  assert.ok(result.reason.length < 700);
});

test("never throws on rows that are not lists", () => {
  assert.equal(compare(null, [[1n]]).equal, false);
  assert.equal(compare([[1n]], 5).equal, false);
});
