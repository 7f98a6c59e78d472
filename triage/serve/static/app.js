// triage serve's page: paste a ticket, watch each criterion's card fill in from the event stream.
// No build step, no network beyond this server; every string is set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { packs: [], running: null, history: JSON.parse(sessionStorage.getItem("triage.history") || "[]") };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "width") node.style.width = v; // CSSOM, which the page's CSP allows (no inline styles)
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function headers(extra = {}) {
  const token = sessionStorage.getItem("triage.token") || $("token").value;
  return token ? { ...extra, Authorization: "Bearer " + token } : extra;
}

function say(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function loadHealth() {
  const r = await fetch("/v1/health", { headers: headers() });
  if (r.status === 401) {
    $("token-row").hidden = false;
    $("model").textContent = "this server needs its bearer token";
    return;
  }
  const h = await r.json();
  state.packs = h.packs;
  $("model").textContent = `${h.model.name} · ${h.packs.find((p) => p.default).name}` +
    (h.head ? ` · head ${h.head}` : "") + (h.calibration ? ` · calibration ${h.calibration}` : "");
  $("keep").checked = h.history.default;
  const sel = $("pack");
  sel.replaceChildren(...h.packs.map((p) => el("option", { value: p.name }, `${p.name} v${p.version}`)));
}

function pct(p) { return `${(p * 100).toFixed(1)}%`; }

function pendingCards(pack) {
  const info = state.packs.find((p) => p.name === pack);
  $("cards").replaceChildren(...(info ? info.criteria : []).map((id) =>
    el("article", { class: "card pending", role: "listitem", id: "card-" + id, "aria-busy": "true" },
      el("h3", {}, id), el("p", { class: "muted" }, "waiting…"))));
}

function card(c, latencyMs) {
  const rows = c.options.map((o) => {
    const chosen = o.id === c.choice;
    const value = Math.round(o.probability * 1000) / 10;
    return el("div", { class: "opt" + (chosen ? " chosen" : "") },
      el("span", { class: "name", title: o.label }, (chosen ? "▸ " : "") + o.label),
      el("div", { class: "track", role: "progressbar", "aria-label": `${o.label} ${pct(o.probability)}`,
                  "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(value) },
        el("div", { class: "fill", width: `${value}%` })),
      el("span", { class: "pct" }, pct(o.probability)));
  });
  const meta = el("div", { class: "meta" },
    el("span", { class: "choice" }, `choice: ${c.choice_label}`),
    el("span", { class: "source" }, `decided by: ${c.source}`),
    el("span", { class: "margin" }, `margin ${(c.margin * 100).toFixed(1)} pts`),
    el("span", { class: "latency", title: `tail ${c.tail_ms.toFixed(0)} ms` }, `latency ${Math.round(latencyMs)} ms`));
  return el("article", { class: "card", role: "listitem", id: "card-" + c.id, "aria-label": c.question },
    el("h3", {}, c.question), ...rows, meta);
}

function showCard(c, latencyMs) {
  const node = card(c, latencyMs);
  const old = $("card-" + c.id);
  if (old) old.replaceWith(node); else $("cards").append(node);
}

function remember(result, latencies) {
  state.history.unshift({ result, latencies });
  state.history = state.history.slice(0, 50);
  sessionStorage.setItem("triage.history", JSON.stringify(state.history));
  drawHistory();
}

function drawHistory() {
  $("history").replaceChildren(...state.history.map((h, i) => {
    const r = h.result;
    const summary = r.criteria.map((c) => `${c.id}=${c.choice}`).join(", ");
    const b = el("button", { type: "button" }, `${r.ticket_id}: ${summary}`);
    b.addEventListener("click", () => showResult(r, h.latencies));
    return el("li", {}, b);
  }));
}

function showResult(r, latencies) {
  $("cards").replaceChildren();
  for (const c of r.criteria) showCard(c, latencies[c.id] ?? r.timing.total_ms);
  $("total").textContent = `${r.ticket_id} · ${Math.round(r.timing.total_ms)} ms`;
}

function parseEvents(buffer, onEvent) {
  let cut;
  while ((cut = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, cut);
    buffer = buffer.slice(cut + 2);
    let kind = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) kind = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data) onEvent(kind, JSON.parse(data));
  }
  return buffer;
}

async function score(ev) {
  ev.preventDefault();
  if (state.running) return;
  const text = $("ticket-text").value;
  if (!text.trim()) { say("paste a ticket first", true); return; }
  if ($("token").value) sessionStorage.setItem("triage.token", $("token").value);
  const body = { text, pack: $("pack").value || undefined, history: $("keep").checked };
  if ($("ticket-id").value.trim()) body.id = $("ticket-id").value.trim();
  const ctl = new AbortController();
  state.running = ctl;
  $("score").disabled = true; $("stop").disabled = false;
  pendingCards(body.pack);
  $("total").textContent = "";
  say("queued…");
  const t0 = performance.now();
  const latencies = {};
  try {
    const r = await fetch("/v1/score", { method: "POST", signal: ctl.signal,
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }), body: JSON.stringify(body) });
    if (!r.ok) {
      const e = await r.json().catch(() => ({ error: r.statusText }));
      say(`${r.status}: ${e.error}${e.field ? ` (field ${e.field})` : ""}`, true);
      if (r.status === 401) $("token-row").hidden = false;
      return;
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), (kind, data) => {
        if (kind === "queued") say(data.ahead ? `queued behind ${data.ahead}…` : "scoring…");
        else if (kind === "prefilled") say(`ticket read in ${Math.round(data.prefill_ms)} ms; deciding…`);
        else if (kind === "criterion") { latencies[data.id] = performance.now() - t0; showCard(data, latencies[data.id]); }
        else if (kind === "result") {
          showResult(data, latencies); remember(data, latencies);
          say(`scored ${data.criteria.length} criteria in ${Math.round(performance.now() - t0)} ms`);
        } else if (kind === "error") say(data.error, true);
      });
    }
  } catch (e) {
    say(e.name === "AbortError" ? "stopped" : `failed: ${e.message}`, e.name !== "AbortError");
  } finally {
    state.running = null;
    $("score").disabled = false; $("stop").disabled = true;
  }
}

function stop() { if (state.running) state.running.abort(); }

document.addEventListener("DOMContentLoaded", () => {
  $("ticket-form").addEventListener("submit", score);
  $("stop").addEventListener("click", stop);
  $("ticket-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ticket-form").requestSubmit();
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") stop(); });
  $("token").addEventListener("change", () => { sessionStorage.setItem("triage.token", $("token").value); loadHealth(); });
  drawHistory();
  loadHealth().catch((e) => say(`cannot reach the server: ${e.message}`, true));
});
