// Answers comparison requests for tests/test_js_compare.py: one JSON object per stdin line,
// {"gold": rows, "pred": rows, "order": null | [..], "superset": bool} in the tagged form of
// tests/wire.py, one JSON line back per request: {"equal": bool, "reason": str}.
import { createInterface } from "node:readline";

import { compare } from "../../src/pytest_heron/browser/assets/compare.js";
import { decodeRows } from "./wire.mjs";

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    const req = JSON.parse(line);
    const result = compare(decodeRows(req.gold), decodeRows(req.pred), { order: req.order ?? null, superset: Boolean(req.superset) });
    answer = { equal: result.equal, reason: result.reason };
  } catch (exc) {
    answer = { error: String(exc?.stack ?? exc) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
