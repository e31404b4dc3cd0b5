// The runner page: loads the state into PGlite (worker.js), lists the questions, runs the agent
// loop of pytest_heron.systems.agent against an OpenAI-compatible endpoint, scores each answer
// with the comparator (compare.js) and offers the run as a results file.
//
// Everything an endpoint sends back is untrusted: it is shown with textContent only. The key
// lives in the key field and in this module's memory, and is sent only to the endpoint.

import { compare } from "./compare.js";
import { checkStatement, startGuard } from "./guard.js";
import { decodeRows } from "./wire.js";

const $ = (id) => document.getElementById(id);
const MAX_ROWS = 200_000;
const bench = await (await fetch(new URL("../benchmark.json", import.meta.url))).json();
const PROTOCOL_NAME = "heron-browser-tiny";

// The guard's parser (libpg-query's Emscripten module) is a classic script, not an ES module: it
// defines the global PgQueryModule and finds libpg-query.wasm beside itself. It loads while the
// state does; the first checkStatement waits for it.
startGuard(
  new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = new URL("../libpg-query/libpg-query.js", import.meta.url).href;
    script.onload = () => resolve(globalThis.PgQueryModule);
    script.onerror = () => reject(new Error(`${script.src} did not load`));
    document.head.append(script);
  }),
);

// --- the database worker ----------------------------------------------------------------------

class Database {
  constructor() {
    this.next = 1;
    this.pending = new Map();
    this.ready = null;
    this.manifest = null;
    this.restarts = 0;
  }

  start() {
    this.worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (event) => this.receive(event.data);
    this.worker.onerror = (event) => showLoad(`the database worker failed: ${event.message}`);
    this.ready = this.send("load").then((manifest) => {
      this.manifest = manifest;
      return manifest;
    });
    return this.ready;
  }

  receive(msg) {
    if (msg.type === "progress") {
      $("load-progress").max = msg.total;
      $("load-progress").value = msg.done;
      showLoad(msg.table ? `loading ${msg.done.toLocaleString("en")} / ${msg.total.toLocaleString("en")} rows: ${msg.table}` : "loaded");
      return;
    }
    const waiter = this.pending.get(msg.id);
    if (!waiter) return;
    this.pending.delete(msg.id);
    clearTimeout(waiter.timer);
    if (msg.ok) waiter.resolve(msg.result);
    else waiter.reject(new Error(msg.error));
  }

  send(type, payload = {}, timeoutMs = 0) {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, timer: null };
      if (timeoutMs > 0) waiter.timer = setTimeout(() => this.stopped(id, timeoutMs), timeoutMs);
      this.pending.set(id, waiter);
      this.worker.postMessage({ id, type, ...payload });
    });
  }

  /** A statement ran past its limit: the worker is terminated and the state loaded again. */
  stopped(id, timeoutMs) {
    this.worker.terminate();
    for (const [other, w] of this.pending) {
      clearTimeout(w.timer);
      const err = new Error(other === id ? `the statement ran longer than ${timeoutMs / 1000}s and was stopped` : "the database was restarted");
      err.timeout = other === id;
      w.reject(err);
    }
    this.pending.clear();
    this.restarts += 1;
    this.start();
  }

  async query(sql, timeoutS) {
    await this.ready;
    return this.send("query", { sql, maxRows: MAX_ROWS }, timeoutS * 1000);
  }
}

function showLoad(text) {
  $("load-status").textContent = text;
}

/** One statement, as pytest_heron.sandbox.execute does it: guard, read-only, time limit. */
async function execute(db, sql, timeoutS) {
  const refused = await checkStatement(sql);
  if (refused) return { ok: false, errorKind: "rejected", error: refused.reason };
  try {
    const got = await db.query(sql, timeoutS);
    if (got.tooLarge) return { ok: false, errorKind: "result_too_large", error: got.tooLarge };
    return { ok: true, columns: got.columns, wire: got.rows };
  } catch (exc) {
    return { ok: false, errorKind: exc.timeout ? "timeout" : "db_error", error: exc.message };
  }
}

// --- the agent loop (pytest_heron.systems.agent) ---------------------------------------------

class AdapterFailure extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function cellText(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return cap(v);
  const [[tag, x]] = Object.entries(v);
  if (tag === "int") return Number.isSafeInteger(Number(x)) ? Number(x) : x;
  if (tag === "float") return Number.isFinite(Number(x)) ? Number(x) : x;
  if (tag === "timestamp") return cap(x.replace("T", " "));
  if (tag === "list" || tag === "json") return cap(JSON.stringify(x));
  return cap(String(x));
}

function cap(v) {
  if (typeof v !== "string") return v;
  const limit = bench.agent.cell_chars;
  return v.length <= limit ? v : v.slice(0, limit - 3) + "...";
}

/** What run_sql_query tells the model (as the Python tool_result does). */
function toolResult(result) {
  if (!result.ok) return JSON.stringify({ error: `${result.errorKind}: ${result.error}` });
  return JSON.stringify({
    row_count: result.wire.length,
    columns: result.columns,
    rows: result.wire.slice(0, bench.agent.preview_rows).map((row) => row.map(cellText)),
  });
}

function tablesReferenced(sqls) {
  const found = new Set();
  for (const sql of sqls) {
    const lower = sql.toLowerCase();
    for (const t of bench.tables) {
      const at = lower.indexOf(t);
      if (at >= 0 && !/[\w.]/.test(lower[at + t.length] ?? "") && !/[\w.]/.test(lower[at - 1] ?? "")) found.add(t);
    }
  }
  return [...found].sort();
}

/** The request as the Python client sends it (ChatClient.sent_params, wire_messages). */
function requestBody(settings, messages) {
  const wire = messages.map((m) => (m.role === "assistant" && m.tool_calls && m.content === null ? { ...m, content: "" } : m));
  const body = { model: settings.model, messages: wire, temperature: 0, tool_choice: "auto", tools: bench.agent.tools };
  if (bench.agent.max_tokens !== null) body.max_tokens = bench.agent.max_tokens;
  return body;
}

/** What the agent says when its calls ran out (agent.give_up_reason). */
function giveUpReason(queries, anyOk, earlySubmits, textOnly) {
  if (earlySubmits) return `results_ok was called ${earlySubmits} times but no query had run successfully before it (${queries} queries run)`;
  if (anyOk) return `results_ok was never called (${queries} queries run, the last successful one not submitted)`;
  const tail = textOnly ? `; its last ${textOnly} replies held no action` : "";
  return `results_ok was never called and no query ran successfully (${queries} queries run${tail})`;
}

async function chat(settings, messages, deadline, meter) {
  const controller = new AbortController();
  const left = deadline - performance.now();
  if (left <= 0) throw new AdapterFailure("adapter_timeout", "out of time for the LLM call");
  const timer = setTimeout(() => controller.abort(), left);
  const started = performance.now();
  let response;
  try {
    response = await fetch(settings.endpoint.replace(/\/+$/, "") + "/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${settings.key}` },
      body: JSON.stringify(requestBody(settings, messages)),
      signal: controller.signal,
    });
  } catch (exc) {
    if (controller.signal.aborted) throw new AdapterFailure("adapter_timeout", "the LLM call ran out of time");
    // a browser says only "Failed to fetch" for a server that is down and for one that sends no
    // CORS headers (this page is another origin): name both, and the stub's switch
    throw new AdapterFailure(
      "adapter_error",
      `the endpoint could not be reached (${exc.message}): is it running, and does it send CORS ` +
        "headers for this page (Access-Control-Allow-Origin)? `heron stub-llm --cors` does",
    );
  } finally {
    clearTimeout(timer);
  }
  const text = await response.text();
  meter.llmMs += performance.now() - started;
  if (!response.ok) throw new AdapterFailure("adapter_error", `HTTP ${response.status}: ${text.slice(0, 300)}`);
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new AdapterFailure("adapter_error", "the endpoint's reply is not JSON");
  }
  meter.calls += 1;
  const usage = body?.usage ?? {};
  meter.prompt += Number.isInteger(usage.prompt_tokens) ? usage.prompt_tokens : 0;
  meter.completion += Number.isInteger(usage.completion_tokens) ? usage.completion_tokens : 0;
  const message = body?.choices?.[0]?.message;
  if (!message || typeof message !== "object") throw new AdapterFailure("adapter_error", "the reply has no message");
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  return {
    content: typeof message.content === "string" ? message.content : null,
    toolCalls: calls.map((c) => ({
      id: String(c?.id ?? ""),
      name: String(c?.function?.name ?? ""),
      arguments: typeof c?.function?.arguments === "string" ? c.function.arguments : JSON.stringify(c?.function?.arguments ?? {}),
    })),
  };
}

async function runAgent(db, settings, q, meter) {
  const deadline = performance.now() + settings.timeoutS * 1000;
  const messages = [
    { role: "system", content: bench.agent.system },
    { role: "user", content: q.question },
  ];
  const ran = [];
  let lastOk = null;
  let toolsUsed = false;
  let textOnly = 0;
  let earlySubmits = 0;
  for (let call = 0; call < bench.agent.max_calls; call++) {
    if (performance.now() >= deadline) throw new AdapterFailure("adapter_timeout", `the agent ran out of time after ${meter.calls} LLM calls`);
    const reply = await chat(settings, messages, deadline, meter);
    const assistant = { role: "assistant", content: reply.content };
    if (reply.toolCalls.length) {
      assistant.tool_calls = reply.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
    }
    messages.push(assistant);
    if (!reply.toolCalls.length) {
      textOnly += 1;
      if (!toolsUsed && textOnly >= 2) {
        throw new AdapterFailure("adapter_error", "the model answered in text twice without calling a tool: the endpoint or model does not seem to support tool calls (the Python agent has --heron-agent-mode grammar for such models)");
      }
      messages.push({ role: "user", content: bench.agent.nudge });
      continue;
    }
    textOnly = 0;
    toolsUsed = true;
    for (const c of reply.toolCalls) {
      let content;
      if (c.name === "results_ok") {
        if (lastOk !== null) return { sql: lastOk, tables: tablesReferenced(ran) };
        earlySubmits += 1;
        content = bench.agent.nothing_ran;
      } else if (c.name === "run_sql_query") {
        let args = {};
        try {
          args = JSON.parse(c.arguments || "{}") ?? {};
        } catch {
          args = {};
        }
        const sql = String(args.sql ?? "").trim();
        if (!sql) content = JSON.stringify({ error: "run_sql_query needs a 'sql' argument" });
        else {
          ran.push(sql);
          const result = await execute(db, sql, settings.statementTimeoutS);
          if (result.ok) lastOk = sql;
          content = toolResult(result);
        }
      } else content = JSON.stringify({ error: `unknown tool ${JSON.stringify(c.name)}` });
      messages.push({ role: "tool", tool_call_id: c.id, content });
    }
  }
  throw new AdapterFailure(
    "adapter_error",
    `the agent reached its limit of ${bench.agent.max_calls} LLM calls without an answer: ` + giveUpReason(ran.length, lastOk !== null, earlySubmits, textOnly),
  );
}

// --- scoring ----------------------------------------------------------------------------------

const goldCache = new Map();

async function goldRows(db, q, statementTimeoutS) {
  if (!goldCache.has(q.id)) {
    const got = await execute(db, q.gold_sql, Math.max(statementTimeoutS, 120));
    if (!got.ok) throw new Error(`gold of ${q.id} failed: ${got.error}`);
    goldCache.set(q.id, decodeRows(got.wire));
  }
  return goldCache.get(q.id);
}

async function answer(db, settings, q) {
  const meter = { prompt: 0, completion: 0, calls: 0, llmMs: 0 };
  const started = performance.now();
  const outcome = {
    id: q.id,
    correct: false,
    correct_by_state: { [String(bench.seed)]: false },
    error_kind: null,
    error: null,
    pred_sql: null,
    tables_in_context: null,
    usage: null,
    latency_s: null,
    ves: null,
    soft_f1: null,
    reason: null,
    shape: q.shape,
    retrieval: q.retrieval,
    traps: q.traps,
    gold_tables: q.gold_tables,
    exact_match: false,
    correct_superset: null, // not scored here: n/a, never 0 (the page has no superset pass)
    samples: null,
  };
  try {
    const prediction = await runAgent(db, settings, q, meter);
    outcome.pred_sql = prediction.sql;
    outcome.tables_in_context = prediction.tables;
  } catch (exc) {
    outcome.error_kind = exc instanceof AdapterFailure ? exc.kind : "adapter_error";
    outcome.error = exc.message;
  }
  outcome.latency_s = Math.round(performance.now() - started) / 1000;
  outcome.usage = { prompt_tokens: meter.prompt, completion_tokens: meter.completion, calls: meter.calls, cached_calls: 0, llm_ms: Math.round(meter.llmMs) };
  if (outcome.pred_sql !== null) {
    try {
      const gold = await goldRows(db, q, settings.statementTimeoutS);
      const got = await execute(db, outcome.pred_sql, settings.statementTimeoutS);
      if (!got.ok) {
        outcome.error_kind = got.errorKind;
        outcome.error = got.error;
      } else {
        const verdict = compare(gold, decodeRows(got.wire), { order: q.order });
        outcome.correct = verdict.equal;
        outcome.correct_by_state[String(bench.seed)] = verdict.equal;
        outcome.reason = verdict.equal ? null : verdict.reason;
        outcome.exact_match = outcome.pred_sql.trim() === q.gold_sql.trim();
      }
    } catch (exc) {
      // the page's own failure (gold did not run): never the system's fault
      outcome.error_kind = "infra_crash";
      outcome.error = exc.message;
    }
  }
  return outcome;
}

// --- the results file -------------------------------------------------------------------------

function median(values) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

const pct = (k, n) => (n ? Math.round((10000 * k) / n) / 100 : null);

function protocolText(model) {
  return [
    "# A protocol for runs of the browser runner (tiny scale, one state): not the board's.",
    `name: ${PROTOCOL_NAME}`,
    `model: ${JSON.stringify(model)}`,
    "temperature: 0",
    `scale: ${bench.scale}`,
    `seeds: [${bench.seed}]`,
    "states: 1",
    "samples: 1",
    "tolerance: 2",
    "prices: builtin",
    "",
  ].join("\n");
}

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function resultsDocument(run) {
  const outcomes = [...run.outcomes].sort((a, b) => (a.id < b.id ? -1 : 1));
  const n = outcomes.length;
  const correct = outcomes.filter((o) => o.correct).length;
  const prompt = outcomes.reduce((s, o) => s + o.usage.prompt_tokens, 0);
  const completion = outcomes.reduce((s, o) => s + o.usage.completion_tokens, 0);
  const protocol = protocolText(run.settings.model);
  return {
    version: 1,
    board_eligible: false,
    note: "a browser run (PGlite, tiny scale, one state): not eligible for the leaderboard",
    conditions: {
      adapter: bench.agent.name,
      adapter_version: bench.agent.version,
      scale: bench.scale,
      seeds: [bench.seed],
      states: 1,
      model: run.settings.model,
      temperature: 0,
      samples: 1,
      adapter_conditions: { agent_mode: bench.agent.mode, runner: "browser" },
      price: null,
      n_questions: n,
      tables: bench.tables.length,
      schemas: db.manifest?.schemas.length ?? null,
      rows: db.manifest?.rows ?? null,
      backend: "pglite",
      postgres_version: bench.postgres_version,
      heron_version: bench.heron_version,
      data_version: bench.data_version,
      questions_digest: bench.questions_digest,
      sqlglot_version: null,
      psycopg_version: null,
      started_at: run.startedAt,
      machine: "browser",
      protocol: PROTOCOL_NAME,
      protocol_digest: (await sha256Hex(protocol)).slice(0, 16),
    },
    metrics: {
      ex1: pct(correct, n),
      ex_multistate: pct(correct, n),
      exact_match: pct(outcomes.filter((o) => o.exact_match).length, n),
      tokens_prompt: prompt,
      tokens_completion: completion,
      tokens_per_q: n ? Math.round(((prompt + completion) / n) * 10) / 10 : null,
      errors: outcomes.filter((o) => o.error_kind !== null).length,
      latency_s_median: median(outcomes.map((o) => o.latency_s)),
    },
    breakdown: {},
    questions: outcomes,
  };
}

function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// --- the page ---------------------------------------------------------------------------------

const db = new Database();
const run = { outcomes: [], settings: null, startedAt: null };

function tagsOf(q) {
  return [`shape_${q.shape}`, `retrieval_${q.retrieval}`, ...q.traps.map((t) => `trap_${t}`)];
}

function renderQuestions() {
  const body = $("questions").tBodies[0];
  const tags = new Set();
  for (const q of bench.questions) {
    const tr = document.createElement("tr");
    tr.dataset.id = q.id;
    tr.dataset.tags = tagsOf(q).join(" ");
    const pick = document.createElement("input");
    pick.type = "checkbox";
    pick.className = "pick";
    pick.value = q.id;
    pick.addEventListener("change", countSelected);
    const cells = [pick, q.id, q.question];
    for (const c of cells) {
      const td = document.createElement("td");
      if (typeof c === "string") td.textContent = c;
      else td.append(c);
      tr.append(td);
    }
    const td = document.createElement("td");
    for (const t of tagsOf(q)) {
      tags.add(t);
      const span = document.createElement("span");
      span.className = "tag";
      span.textContent = t;
      td.append(span);
    }
    tr.append(td);
    body.append(tr);
  }
  for (const t of [...tags].sort()) {
    const opt = document.createElement("option");
    opt.value = t;
    opt.textContent = t;
    $("tag-filter").append(opt);
  }
  $("tag-filter").addEventListener("change", filter);
  $("select-shown").addEventListener("click", () => {
    for (const tr of body.rows) if (!tr.hidden) tr.querySelector(".pick").checked = true;
    countSelected();
  });
  $("select-none").addEventListener("click", () => {
    for (const box of body.querySelectorAll(".pick")) box.checked = false;
    countSelected();
  });
  countSelected();
}

function filter() {
  const tag = $("tag-filter").value;
  for (const tr of $("questions").tBodies[0].rows) tr.hidden = Boolean(tag) && !tr.dataset.tags.split(" ").includes(tag);
}

function selected() {
  return [...document.querySelectorAll("#questions .pick:checked")].map((b) => b.value);
}

function countSelected() {
  $("selected-count").textContent = `${selected().length} of ${bench.questions.length} selected`;
}

function showOutcome(o) {
  const tr = document.createElement("tr");
  tr.dataset.id = o.id;
  const verdict = o.correct ? "correct" : o.error_kind ? "error" : "wrong";
  tr.className = verdict;
  const details = o.correct ? o.pred_sql : o.error_kind ? `${o.error_kind}: ${o.error}` : o.reason;
  const cells = [
    [o.id, "id"],
    [verdict, "verdict"],
    [details ?? "", "details"],
    [String(o.usage.calls), "calls"],
    [String(o.usage.prompt_tokens + o.usage.completion_tokens), "tokens"],
    [o.latency_s.toFixed(1), "seconds"],
  ];
  for (const [text, cls] of cells) {
    const td = document.createElement("td");
    td.className = cls;
    if (cls === "details" && verdict === "wrong") {
      // the counterexample, then the SQL that gave it
      const reason = document.createElement("div");
      reason.className = "reason";
      reason.textContent = text;
      const sql = document.createElement("div");
      sql.className = "sql";
      sql.textContent = o.pred_sql ?? "";
      td.append(reason, sql);
    } else {
      td.textContent = text;
    }
    tr.append(td);
  }
  $("results").tBodies[0].append(tr);
}

function showTotals() {
  const n = run.outcomes.length;
  const correct = run.outcomes.filter((o) => o.correct).length;
  const prompt = run.outcomes.reduce((s, o) => s + o.usage.prompt_tokens, 0);
  const completion = run.outcomes.reduce((s, o) => s + o.usage.completion_tokens, 0);
  const totals = $("totals");
  totals.dataset.correct = String(correct);
  totals.dataset.questions = String(n);
  totals.dataset.promptTokens = String(prompt);
  totals.dataset.completionTokens = String(completion);
  totals.textContent = `${correct} of ${n} correct (EX ${pct(correct, n) ?? 0}%, tiny scale, seed ${bench.seed}, one state, model ${run.settings.model}); tokens billed: ${prompt} prompt + ${completion} completion = ${prompt + completion}`;
}

async function runSelected() {
  const ids = selected();
  if (!ids.length) {
    $("run-status").textContent = "select at least one question";
    return;
  }
  run.settings = {
    endpoint: $("endpoint").value.trim(),
    key: $("key").value,
    model: $("model").value.trim(),
    timeoutS: Number($("timeout").value) || 120,
    statementTimeoutS: Number($("statement-timeout").value) || 30,
  };
  run.outcomes = [];
  run.startedAt = new Date().toISOString();
  $("results").tBodies[0].replaceChildren();
  $("run").disabled = true;
  $("download").disabled = true;
  const byId = new Map(bench.questions.map((q) => [q.id, q]));
  for (const [k, id] of ids.entries()) {
    $("run-status").textContent = `running ${id} (${k + 1} of ${ids.length})`;
    const outcome = await answer(db, run.settings, byId.get(id));
    run.outcomes.push(outcome);
    showOutcome(outcome);
    showTotals();
  }
  $("run-status").textContent = `done: ${ids.length} question(s)`;
  $("run-status").dataset.done = "1";
  $("run").disabled = false;
  $("download").disabled = false;
}

async function downloadResults() {
  const doc = await resultsDocument(run);
  download("heron-browser-results.json", JSON.stringify(doc, null, 2) + "\n", "application/json");
  download("heron-browser-protocol.yaml", protocolText(run.settings.model), "text/yaml");
}

async function showChecksums() {
  const lines = await db.send("checksums");
  $("checksums").textContent = lines.map((l) => l.join("\t")).join("\n");
  const total = lines[lines.length - 1];
  $("checksum-total").textContent = `total ${total[1]} rows, ${total[2]}`;
  $("checksums").dataset.done = "1";
}

renderQuestions();
$("run").addEventListener("click", runSelected);
$("download").addEventListener("click", downloadResults);
db.start()
  .then(async () => {
    $("run").disabled = false;
    $("load-status").dataset.done = "1";
    await showChecksums();
  })
  .catch((exc) => showLoad(`loading failed: ${exc.message}`));
