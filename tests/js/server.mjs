// Answers requests from the Python tests (tests/test_js_compare.py, tests/test_js_guard.py), one
// JSON object per stdin line and one JSON line back:
//   {"gold": rows, "pred": rows, "order": null | [..], "superset": bool} (rows in the tagged
//   form of tests/wire.py) -> {"equal": bool, "reason": str}
//   {"guard": sql} -> {"verdict": null | {"kind", "reason"}}
//   {"guard_rules": true} -> {"writes": the guard's table of write and lock keys}
import { createInterface } from "node:readline";

import { compare } from "../../src/pytest_heron/browser/assets/compare.js";
import { WRITES } from "../../src/pytest_heron/browser/assets/guard.js";
import { decodeRows } from "./wire.mjs";

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    const req = JSON.parse(line);
    if ("guard" in req) {
      const { checkStatement } = await import("./parser.mjs"); // loaded on the first guard request
      process.stdout.write(JSON.stringify({ verdict: await checkStatement(req.guard) }) + "\n");
      continue;
    }
    if ("guard_rules" in req) {
      process.stdout.write(JSON.stringify({ writes: WRITES }) + "\n");
      continue;
    }
    const result = compare(decodeRows(req.gold), decodeRows(req.pred), { order: req.order ?? null, superset: Boolean(req.superset) });
    answer = { equal: result.equal, reason: result.reason };
  } catch (exc) {
    answer = { error: String(exc?.stack ?? exc) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
