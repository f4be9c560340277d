// dynrag trace viewer: ask the server, or open a saved trace / predictions.jsonl, and draw the
// answer with each word shaded by its trigger score and each retrieval marked where it fired.
// Plain DOM code, no build step, no network beyond this server. Text is always set with
// textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORE = "dynrag-api-key";
let methods = [];
let records = [];

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function apiHeaders() {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers["Authorization"] = "Bearer " + key;
  return headers;
}

async function api(path, body) {
  const response = await fetch(path, body === undefined
    ? { headers: apiHeaders() }
    : { method: "POST", headers: apiHeaders(), body: JSON.stringify(body) });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) {
    showKeyBar(data && data.error ? data.error.message : "an API key is needed");
    throw new Error("API key needed");
  }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.status + " " + response.statusText;
    throw new Error(message);
  }
  return data;
}

function showKeyBar(message) {
  $("key-bar").hidden = false;
  $("key-error").textContent = sessionStorage.getItem(KEY_STORE) ? message : "";
  $("api-key").focus();
}

// ---- server: methods and their options -------------------------------------------------

async function loadServer() {
  try {
    const health = await fetch("/health").then((r) => r.json());
    $("server-info").textContent = "model " + health.model + " · index " + health.index;
  } catch (e) {
    $("server-info").textContent = "no server: open a saved trace file";
  }
  try {
    const models = await api("/v1/models");
    $("key-bar").hidden = true;
    methods = models.data;
    const select = $("method");
    select.textContent = "";
    for (const m of methods) {
      const option = el("option", null, m.id + (m.available ? "" : " (needs attention: not on this model)"));
      option.value = m.id;
      option.disabled = !m.available;
      select.appendChild(option);
    }
    const preferred = methods.find((m) => m.id === "dragin" && m.available) || methods.find((m) => m.available);
    if (preferred) select.value = preferred.id;
    renderOptions();
  } catch (e) {
    $("status").textContent = e.message;
  }
}

function renderOptions() {
  const method = methods.find((m) => m.id === $("method").value);
  const box = $("options");
  box.textContent = "";
  if (!method) return;
  $("method-summary").textContent = method.summary || "";
  for (const [name, spec] of Object.entries(method.options || {})) {
    const row = el("div", "opt");
    const label = el("label", null, name);
    label.htmlFor = "opt-" + name;
    const input = el("input");
    input.id = "opt-" + name;
    input.dataset.option = name;
    input.type = "text";
    const def = spec.default === undefined || spec.default === null ? "" : String(spec.default);
    input.placeholder = def === "" ? "(default)" : def;
    input.title = spec.description || "";
    row.append(label, input);
    box.appendChild(row);
  }
}

function optionValues() {
  const values = {};
  for (const input of $("options").querySelectorAll("input[data-option]")) {
    const raw = input.value.trim();
    if (raw === "") continue;
    // Numbers and booleans as JSON; anything else as the string typed.
    try { values[input.dataset.option] = JSON.parse(raw); } catch (e) { values[input.dataset.option] = raw; }
  }
  return values;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) { $("status").textContent = "type a question first"; return; }
  const button = $("ask");
  button.disabled = true;
  const started = performance.now();
  $("status").textContent = "answering with " + $("method").value + "…";
  try {
    const trace = await api("/v1/ask", { question, method: $("method").value, options: optionValues() });
    $("status").textContent = "answered in " + ((performance.now() - started) / 1000).toFixed(1) + " s";
    render(trace);
  } catch (e) {
    $("status").textContent = "error: " + e.message;
  } finally {
    button.disabled = false;
  }
}

// ---- files: a trace or predictions.jsonl ----------------------------------------------

function openFile(event) {
  const file = event.target.files[0];
  if (!file) return;
  file.text().then((text) => {
    let parsed;
    const trimmed = text.trim();
    if (trimmed.startsWith("{") && !trimmed.includes("\n{")) {
      parsed = [JSON.parse(trimmed)];
    } else {
      parsed = [];
      trimmed.split("\n").forEach((line, i) => {
        if (!line.trim()) return;
        try { parsed.push(JSON.parse(line)); } catch (e) { $("status").textContent = file.name + ":" + (i + 1) + ": not JSON (skipped)"; }
      });
    }
    records = parsed;
    const select = $("records");
    select.textContent = "";
    select.hidden = records.length < 2;
    records.forEach((r, i) => {
      const score = r.em !== undefined ? " · EM " + r.em + " F1 " + Number(r.f1).toFixed(2) : "";
      const option = el("option", null, (r.id ? r.id + ": " : "") + (r.question || "").slice(0, 70) + score);
      option.value = String(i);
      select.appendChild(option);
    });
    if (records.length) render(records[0]);
    $("status").textContent = "opened " + file.name + " (" + records.length + (records.length === 1 ? " record)" : " records)");
  }).catch((e) => { $("status").textContent = "cannot read " + file.name + ": " + e.message; });
}

// ---- per-word trigger scores ------------------------------------------------------------

// Each step becomes units {text, level 0..1 (1 = at the method's threshold), tip, struck}, plus
// where a retrieval it caused sits among them (cut).
function stepUnits(step, trace) {
  const d = step.details || {};
  const options = trace.options || {};
  if (Array.isArray(d.words) && Array.isArray(d.score)) {          // dragin: RIND per word
    const theta = Number(options.theta) || Math.max(...d.score, 1e-9);
    const trigger = d.trigger === null || d.trigger === undefined ? null : d.trigger;
    const units = d.words.map((w, i) => ({
      text: (i ? " " : "") + w,
      level: d.score[i] / theta,
      tip: "RIND " + fmt(d.score[i]) + " = entropy " + fmt(at(d.entropy, i)) + " × attention " + fmt(at(d.attention, i)) +
        (d.content && !d.content[i] ? " (not a content word)" : ""),
      struck: trigger !== null && i >= trigger,
    }));
    return { units, cut: trigger };
  }
  if (Array.isArray(d.tokens) && Array.isArray(d.probabilities)) { // flare: token probability
    const theta = options.theta === undefined ? 0.4 : Number(options.theta);
    const tentative = step.kind === "tentative";
    const units = d.tokens.map((t, i) => ({
      text: t,
      level: (1 - d.probabilities[i]) / Math.max(1 - theta, 1e-9),
      tip: "p = " + fmt(d.probabilities[i]) + (d.probabilities[i] < theta ? " (below θ = " + theta + ")" : ""),
      struck: tentative,
    }));
    return { units, cut: tentative ? units.length : null };
  }
  if (Array.isArray(d.words) && Array.isArray(d.scores)) {         // any method: a per-word score list (etc)
    const top = Number(d.threshold) || Math.max(...d.scores, 1e-9);
    // A trigger index, when given, cuts the step there as dragin's does.
    const trigger = typeof d.trigger === "number" ? d.trigger : null;
    return { units: d.words.map((w, i) => ({ text: (i ? " " : "") + w, level: d.scores[i] / top, tip: "score " + fmt(d.scores[i]) +
      (Array.isArray(d.entropy) ? " (entropy " + fmt(d.entropy[i]) + ")" : ""), struck: trigger !== null && i >= trigger })), cut: trigger };
  }
  const text = step.kept_text !== undefined ? step.kept_text : step.text;
  const thrown = step.text && step.kept_text !== undefined && step.text.length > step.kept_text.length
    ? step.text.slice(step.kept_text.length) : "";
  if (typeof d.uncertainty === "number" && typeof d.threshold === "number") { // seakr: a step's eigen-score
    // One score per step (its sampled continuations' hidden states): every word of the step gets
    // it, half-red at the threshold; the scale is in log-determinant units, so 0.5 above is strong.
    const level = 2 / (1 + Math.exp(-4 * (d.uncertainty - d.threshold)));
    const tip = "uncertainty " + fmt(d.uncertainty) + (d.uncertainty > d.threshold ? " > " : " ≤ ") + "threshold " +
      fmt(d.threshold) + (d.decision ? " → " + d.decision : "") + (d.candidate ? " (passage " + d.candidate + ")" : "");
    const shown = step.kind === "tentative" || step.kind === "candidate" || step.kind === "read" ? step.text : text;
    const struck = step.kind === "tentative" || step.kind === "candidate";
    return { units: (shown || "").split(/(?=\s)/).map((w) => ({ text: w, level, tip, struck })), cut: struck ? 0 : null };
  }
  if (typeof d.margin === "number") {                              // deeprag: retrieve/answer margin
    // margin > 0 retrieves; shade by a logistic of the margin, half-red at the threshold (0).
    const level = 1 / (1 + Math.exp(-2 * d.margin)) * 2;
    const tip = "margin " + fmt(d.margin) + " → " + (d.decision || (d.margin > 0 ? "retrieve" : "answer")) +
      " (log P retrieve " + fmt(d.logprob_retrieve) + ", log P answer " + fmt(d.logprob_answer) + ")";
    const words = (d.subquery ? d.subquery + " → " : "") + (text || d.answer || "");
    return { units: words.split(/(?=\s)/).map((w) => ({ text: w, level, tip })), cut: null };
  }
  const units = [];
  if (text) units.push({ text, level: 0, tip: step.kind });
  if (thrown) units.push({ text: thrown, level: 0, tip: "thrown away", struck: true });
  return { units, cut: null };
}

function at(list, i) { return Array.isArray(list) ? list[i] : undefined; }
function fmt(v) { return v === undefined || v === null ? "–" : Number(v).toFixed(3); }

function shade(level) {
  const x = Math.max(0, Math.min(1, Number(level) || 0));
  return x <= 0.02 ? "" : "rgba(225, 45, 45, " + (0.08 + 0.72 * x).toFixed(3) + ")";
}

// Where each retrieval goes: after the step whose cumulative kept tokens reach its position,
// preferring a step that caused it (a cut, a tentative sentence, a deeprag decision).
function placeRetrievals(steps, retrievals) {
  const cum = [];
  let total = 0;
  for (const s of steps) { total += s.kept_tokens === undefined || s.kept_tokens === null ? (s.generated_tokens || 0) : s.kept_tokens; cum.push(total); }
  const causes = (s) => s.kind === "tentative" || (s.details && s.details.trigger !== null && s.details.trigger !== undefined) ||
    s.kind === "decision" || s.kind === "subquery";
  const place = [];
  let prev = -1;
  for (const r of retrievals) {
    const pos = r.position || 0;
    let cause = -1;
    let last = prev;
    for (let i = prev + 1; i < steps.length && cum[i] <= pos; i++) {
      last = i;
      if (cause < 0 && cum[i] === pos && causes(steps[i])) cause = i;
    }
    prev = cause >= 0 ? cause : last;
    place.push(prev);
  }
  return place; // index of the step each retrieval follows (-1: before the first)
}

// ---- drawing ---------------------------------------------------------------------------

function render(trace) {
  $("result").hidden = false;
  $("q-text").textContent = trace.question || "";
  $("final-answer").textContent = trace.final_answer || "(no answer)";
  const gold = trace.answers ? "gold: " + trace.answers.join(" / ") + (trace.em !== undefined ? " · EM " + trace.em + " · F1 " + Number(trace.f1).toFixed(2) : "") : "";
  $("gold").textContent = gold;
  const retrievals = Array.isArray(trace.retrievals) ? trace.retrievals : [];
  const nRetrievals = Array.isArray(trace.retrievals) ? trace.retrievals.length : (trace.retrievals || 0);
  $("meta").textContent = [trace.method, trace.model, nRetrievals + " retrievals",
    (trace.generated_tokens || 0) + " generated tokens", trace.seconds !== undefined ? Number(trace.seconds).toFixed(1) + " s" : ""]
    .filter(Boolean).join(" · ");

  const text = $("answer-text");
  text.textContent = "";
  const steps = Array.isArray(trace.steps) ? trace.steps : [];
  if (!steps.length) {
    text.appendChild(el("span", "w", trace.answer || trace.prediction || ""));
  }
  const place = placeRetrievals(steps, retrievals);
  const marker = (n) => {
    const m = el("span", "retrieval-marker", "⟲" + (n + 1));
    m.title = "retrieval " + (n + 1) + ": " + (retrievals[n].query || "");
    m.addEventListener("click", () => focusRetrieval(n));
    return m;
  };
  place.forEach((p, n) => { if (p < 0) text.appendChild(marker(n)); });
  steps.forEach((step, i) => {
    const { units, cut } = stepUnits(step, trace);
    if (step.kind !== "generate" && units.length) text.appendChild(el("span", "step-kind", step.kind));
    const mine = place.map((p, n) => (p === i ? n : -1)).filter((n) => n >= 0);
    units.forEach((u, j) => {
      if (cut !== null && j === cut && mine.length) text.appendChild(marker(mine.shift()));
      // Spaces between words stay outside the shaded boxes; a step that starts mid-line after
      // earlier text gets the space its words do not carry.
      const lead = u.text.match(/^\s*/)[0] || (j === 0 && text.textContent && !/\s$/.test(text.textContent) ? " " : "");
      if (lead) text.appendChild(document.createTextNode(lead));
      const span = el("span", "w" + (u.struck ? " struck" : ""), u.text.trimStart());
      const bg = shade(u.level);
      if (bg) span.style.backgroundColor = bg;
      span.dataset.score = String(Math.max(0, Number(u.level) || 0).toFixed(4));
      span.title = u.tip || "";
      text.appendChild(span);
    });
    mine.forEach((n) => text.appendChild(marker(n)));
  });

  const list = $("retrievals");
  list.textContent = "";
  $("retrievals-title").textContent = nRetrievals ? "Retrievals" : "Retrievals: none";
  retrievals.forEach((r, n) => list.appendChild(retrievalBlock(r, n)));
  if (!retrievals.length && Array.isArray(trace.queries)) {      // a predictions.jsonl record
    trace.queries.forEach((q, n) => list.appendChild(retrievalBlock({ query: q, hits: [] }, n)));
    if (trace.retrieved_ids && trace.retrieved_ids.length) {
      list.appendChild(el("div", "dim records-note", "retrieved passage ids: " + trace.retrieved_ids.join(", ")));
    }
  }
}

function retrievalBlock(r, n) {
  const block = el("div", "retrieval");
  block.id = "retrieval-" + (n + 1);
  const head = el("div", "head");
  head.append(el("strong", null, "⟲" + (n + 1) + " "),
    el("span", null, (r.reason ? r.reason + " · " : "") + (r.position ? "after " + r.position + " tokens" : "before generation") + " · query "),
    el("span", "query", r.query || "(empty)"));
  block.appendChild(head);
  for (const hit of r.hits || []) {
    const p = el("div", "passage");
    p.append(el("span", "score", Number(hit.score).toFixed(2)), el("span", "title", hit.title || hit.id), el("span", null, " — " + hit.text));
    block.appendChild(p);
  }
  return block;
}

function focusRetrieval(n) {
  document.querySelectorAll(".retrieval.focus").forEach((b) => b.classList.remove("focus"));
  const block = $("retrieval-" + (n + 1));
  if (block) { block.classList.add("focus"); block.scrollIntoView({ block: "nearest" }); }
}

// ---- wiring ----------------------------------------------------------------------------

$("ask-form").addEventListener("submit", ask);
$("method").addEventListener("change", renderOptions);
$("file").addEventListener("change", openFile);
$("records").addEventListener("change", (e) => render(records[Number(e.target.value)]));
$("key-save").addEventListener("click", () => {
  sessionStorage.setItem(KEY_STORE, $("api-key").value.trim());
  loadServer();
});
$("api-key").addEventListener("keydown", (e) => { if (e.key === "Enter") $("key-save").click(); });
loadServer();
