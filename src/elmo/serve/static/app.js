// The sense page: POST /v1/similarity and draw one heat map per layer, with the groups found.
"use strict";

const GROUP_COLOURS = ["#cfe3f7", "#f7d9c4", "#d5efd2", "#eadcf5", "#f5efc4", "#d4eeee"];
const $ = (id) => document.getElementById(id);

function headers() {
  const result = { "content-type": "application/json" };
  if ($("key").value) result.authorization = `Bearer ${$("key").value}`;
  return result;
}

// Diverging blue-white-red for cosine in [-1, 1], as in the demo's heat map.
function colour(value) {
  const t = Math.max(-1, Math.min(1, value));
  const mix = (a, b, f) => Math.round(a + (b - a) * f);
  const [r, g, b] = t >= 0 ? [mix(247, 178, t), mix(247, 24, t), mix(247, 43, t)]
                           : [mix(247, 33, -t), mix(247, 102, -t), mix(247, 172, -t)];
  return `rgb(${r}, ${g}, ${b})`;
}

function sentences() {
  return $("sentences").value.split("\n").map((line) => line.trim()).filter((line) => line.length > 0);
}

// Words that occur at least twice (case ignored) among the sentences' tokens: one click picks one. The tokens
// are the server's (POST /v1/tokenize, no model run), as only it knows how the model's tokenizer cleans and
// splits text: "bank," is two tokens for a Moses model and one for a whitespace model. A token without a letter
// or digit (punctuation) is no word to compare, nor is an ASCII one of one or two characters (a, of, on: function
// words); a short one in other scripts is: most Chinese words are one or two characters.
let candidatesAsked = 0;
let candidatesTimer;

function scheduleCandidates() {
  clearTimeout(candidatesTimer);
  candidatesTimer = setTimeout(showCandidates, 300);
}

async function showCandidates() {
  const asked = ++candidatesAsked;
  let tokenLists = [];
  try {
    const request = { model: $("model").value || undefined, sentences: sentences() };
    const response = await fetch("/v1/tokenize", { method: "POST", headers: headers(), body: JSON.stringify(request) });
    if (response.ok) tokenLists = (await response.json()).tokens;
  } catch {
    // no server: no suggestions; Compare reports what is wrong
  }
  if (asked !== candidatesAsked) return;  // the sentences changed while the server split them
  const counts = new Map();
  for (const token of tokenLists.flat()) {
    const word = token.toLowerCase();
    counts.set(word, (counts.get(word) || 0) + 1);
  }
  const box = $("candidates");
  box.replaceChildren();
  for (const [word, count] of counts) {
    if (count < 2 || !/[\p{L}\p{N}]/u.test(word) || (/^[\x00-\x7f]{1,2}$/.test(word))) continue;
    const chip = document.createElement("button");
    chip.type = "button";
    chip.textContent = word;
    chip.addEventListener("click", () => { $("word").value = word; compare(); });
    box.append(chip);
  }
}

async function loadModels() {
  const response = await fetch("/v1/models", { headers: headers() });
  if (!response.ok) { setStatus(`models: ${response.status} (an API key may be needed)`, true); return; }
  const select = $("model");
  select.replaceChildren();
  for (const model of (await response.json()).models) {
    select.append(new Option(`${model.name} (${model.n_layers} layers x ${model.dim})`, model.name));
  }
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function label(result, index) {
  const occurrence = result.occurrences[index];
  return `${index + 1}: s${occurrence.sentence + 1}`;
}

function drawLayer(result, layer) {
  const box = document.createElement("div");
  box.className = "layer";
  box.dataset.layer = layer;
  const title = document.createElement("h2");
  title.textContent = layer === 0 ? "layer 0 (context-free)" : `layer ${layer}`;
  const table = document.createElement("table");
  table.className = "heatmap";
  const head = table.createTHead().insertRow();
  head.append(document.createElement("th"));
  result.occurrences.forEach((_, j) => {
    const th = document.createElement("th");
    th.textContent = `${j + 1}`;
    head.append(th);
  });
  const body = table.createTBody();
  result.similarity[layer].forEach((row, i) => {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.textContent = label(result, i);
    tr.append(th);
    row.forEach((value, j) => {
      const td = tr.insertCell();
      td.style.background = colour(value);
      td.dataset.value = value;
      td.textContent = value.toFixed(2);
      td.title = `${label(result, i)} vs ${label(result, j)}: ${value.toFixed(4)}`;
    });
  });
  const groups = document.createElement("div");
  groups.className = "groups";
  groups.textContent = "groups: ";
  result.groups[layer].forEach((members, g) => {
    const chip = document.createElement("span");
    chip.className = "group";
    chip.dataset.members = members.join(",");
    chip.style.background = GROUP_COLOURS[g % GROUP_COLOURS.length];
    chip.textContent = `{${members.map((m) => m + 1).join(", ")}}`;
    groups.append(chip);
  });
  box.append(title, table, groups);
  return box;
}

function drawOccurrences(result) {
  const list = document.createElement("ol");
  list.className = "occurrences";
  for (const occurrence of result.occurrences) {
    const item = document.createElement("li");
    result.tokens[occurrence.sentence].forEach((token, position) => {
      if (position > 0) item.append(" ");
      if (position === occurrence.position) {
        const mark = document.createElement("mark");
        mark.textContent = token;
        item.append(mark);
      } else {
        item.append(token);
      }
    });
    list.append(item);
  }
  return list;
}

async function compare(event) {
  if (event) event.preventDefault();
  setStatus("embedding...");
  const request = { model: $("model").value || undefined, word: $("word").value.trim(), sentences: sentences(),
                    n_groups: Number($("groups").value) || 2 };
  const response = await fetch("/v1/similarity", { method: "POST", headers: headers(), body: JSON.stringify(request) });
  const result = await response.json();
  const results = $("results");
  results.replaceChildren();
  if (!response.ok) {
    const error = result.error || {};
    setStatus(`${response.status}: ${error.field ? error.field + ": " : ""}${error.message}`, true);
    return;
  }
  for (let layer = 0; layer < result.n_layers; layer++) results.append(drawLayer(result, layer));
  results.append(drawOccurrences(result));
  setStatus(`${result.occurrences.length} occurrences of "${result.word}" with model ${result.model}`);
  document.body.dataset.ready = "true";
}

async function start() {
  await loadModels();
  showCandidates();
}

$("query").addEventListener("submit", compare);
$("sentences").addEventListener("input", scheduleCandidates);
$("model").addEventListener("change", scheduleCandidates);
$("key").addEventListener("change", start);
start();
