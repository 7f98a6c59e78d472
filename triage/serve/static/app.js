// triage serve's page: paste a ticket, watch each criterion's card fill in from the event stream,
// answer the cards (labels), add replies to a thread. No build step, no network beyond this server;
// every string is set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const PRODUCT_MODEL = "Qwen3-0.6B";
const ROLES = { customer: "Customer", agent: "Agent reply", note: "Internal note" };
const PREFILL_PAUSE_MS = 400; // a pause in the ticket box this long reads the ticket ahead (POST /v1/prefill)
const state = {
  packs: [],
  running: null,       // the AbortController of the score in flight
  prefill: { timer: null, ctl: null, text: null }, // the read-ahead: its pause timer, its request, its text
  serverHistory: false, // the server keeps a history: the list comes from GET /v1/tickets, cards take labels
  session: JSON.parse(sessionStorage.getItem("triage.history") || "[]"), // else: this tab's tickets
  current: null,       // the ticket on screen: {id, text, messages, pack, result, labels, latencies, kept}
};

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

function explain(status, e) {
  return `${status}: ${e.error}${e.field ? ` (field ${e.field})` : ""}${e.hint ? `. ${e.hint}` : ""}`;
}

async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const r = await fetch(path, init);
  const data = await r.json().catch(() => ({ error: r.statusText || "no answer" }));
  if (r.status === 401) $("token-row").hidden = false;
  return { ok: r.ok, status: r.status, data };
}

function notice(key, text) {
  const old = document.querySelector(`#notices [data-key="${key}"]`);
  if (old) old.remove();
  if (text) $("notices").append(el("p", { class: "notice", "data-key": key }, text));
}

async function loadHealth() {
  const { ok, status, data: h } = await api("GET", "/v1/health");
  if (!ok) {
    $("model").textContent = status === 401 ? "this server needs its bearer token" : explain(status, h);
    return;
  }
  state.packs = h.packs;
  showFit(h.starter);
  // the header: what runs, in words; file paths and fit notes behind "details" (they overflow a phone's width)
  $("model").textContent = `${h.model.name} · pack ${h.packs.find((p) => p.default).name}`;
  $("server-details").hidden = !info("server-info", [
    ["model file", h.model.path], ["context", h.n_ctx ? `${h.n_ctx} tokens` : null],
    ["head", h.head], ["calibration", h.calibration], ["fit", (h.fit_notes || []).join("; ")],
    ["history", h.history.default ? h.history.path || "the user data dir's" : "off (--no-history)"],
  ]);
  notice("stand-in", h.model.stand_in
    ? `Stand-in model: ${h.model.name} is running instead of ${PRODUCT_MODEL}, so decisions are less reliable.`
    : "");
  $("keep").checked = h.history.default;
  state.serverHistory = Boolean(h.history.default);
  $("keep-label").hidden = !state.serverHistory; // nothing to keep a ticket in: no choice offered
  drawKeys();
  $("history-heading").textContent = state.serverHistory ? "Recent tickets (from the history)" : "This session";
  const sel = $("pack");
  sel.replaceChildren(...h.packs.map((p) => el("option", { value: p.name }, `${p.name} v${p.version}`)));
  await drawHistory();
}

function info(listId, pairs) {
  // a details view: the terms and file paths an agent does not need at a glance
  const shown = pairs.filter(([, v]) => v !== null && v !== undefined && v !== "");
  $(listId).replaceChildren(...shown.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
  return shown.length > 0;
}

const KEYS_ON = "On a card: Enter confirms the decision, 1-9 picks the right option (or click it); " +
  "the answer is kept in the history as a label.";
const KEYS_OFF = "Labels are off: this server keeps no history (it was started with --no-history), so an " +
  "answer could not be kept. Start triage serve without --no-history to answer the cards.";
const KEYS_NOT_KEPT = "This ticket was not kept in the history (keep in history was unticked), so its cards " +
  "take no answers. Tick keep in history and score it again to answer them.";

function drawKeys() {
  const cur = state.current;
  $("keys").textContent = !state.serverHistory ? KEYS_OFF : cur && cur.result && !cur.kept ? KEYS_NOT_KEPT : KEYS_ON;
}

function fitWords(f) {
  // the starter head's fit in the background (GET /v1/health's starter), in words; "" when none runs
  if (!f || f.state === "done" || f.state === "stopped") return "";
  if (f.state === "failed") return `The starter head could not be fitted (${f.error}); decisions stay zero-shot.`;
  if (f.state === "fitting head") return `Fitting the starter head on the ${f.rows} example tickets read ` +
    `(${f.criteria_done || 0} of ${f.criteria} criteria${f.eta_s ? `, about ${duration(f.eta_s)} left` : ""}); ` +
    "decisions are zero-shot until it is in.";
  const left = f.eta_s !== null && f.eta_s !== undefined ? `, about ${duration(f.eta_s)} left at this machine's ` +
    `${f.rows_per_s.toFixed(1)} tickets/s` : "";
  return `Fitting the starter head: ${f.rows_done} of ${f.rows} example tickets read${left}; decisions are ` +
    "zero-shot until it is in.";
}

function duration(s) {
  const n = Math.max(0, Math.round(s));
  return n < 60 ? `${n} s` : n < 3600 ? `${Math.floor(n / 60)} min ${n % 60} s` :
    `${Math.floor(n / 3600)} h ${Math.floor((n % 3600) / 60)} min`;
}

function showFit(f) {
  notice("starter-fit", fitWords(f));
  if (f && (f.state === "fitting" || f.state === "fitting head")) {
    setTimeout(async () => {
      const { ok, data } = await api("GET", "/v1/health");
      if (ok) showFit(data.starter);
    }, 3000);
  }
}

function pct(p) { return `${(p * 100).toFixed(1)}%`; }

function pendingCards(pack) {
  const info = state.packs.find((p) => p.name === pack) || state.packs.find((p) => p.default);
  $("cards").replaceChildren(...(info ? info.criteria : []).map((id) =>
    el("article", { class: "card pending", role: "listitem", id: "card-" + id, "aria-busy": "true" },
      el("h3", {}, id), el("p", { class: "muted wait" }, "waiting…"))));
}

function stopCards(why) {
  for (const node of document.querySelectorAll("#cards article.pending")) {
    node.className = "card stopped";
    node.setAttribute("aria-busy", "false");
    const wait = node.querySelector(".wait");
    if (wait) wait.textContent = why;
  }
}

const SOURCE_NOTES = {
  starter: "starter: decided by the pack's starter head (learned from its shipped starter set, not from your " +
    "team's labels); your labels teach it your team's answers",
};

function isShared(c) {
  // read at the shared position: one decode for every such criterion, its time counted once, on none of them
  return c.readout === "shared" || (c.tail_tokens === 0 && c.tail_ms === 0);
}

function tailWords(c) {
  return isShared(c) ? "read in one decode shared with the other learned criteria (its time is the ticket's)"
    : `its own tail: ${Math.round(c.tail_ms)} ms, ${c.tail_tokens} tokens`;
}

function messagesOf(result) { return Math.max(1, (result && result.thread && result.thread.messages) || 1); }

function answerOf(c, label, result) {
  // how a card shows the agent's answer: a correction stays one after a reply, even where the model now
  // agrees; an answer given on fewer messages than the score says which message it was given on
  if (!label) return null;
  const opt = c.options.find((o) => o.id === label.option);
  const confirmed = label.kind !== "correction" && label.option === c.choice;
  let text = confirmed ? "✔ confirmed" : `✔ you: ${opt ? opt.label : label.option}`;
  let title = confirmed ? "you confirmed the model's decision" : "your answer (a correction of the model's)";
  if (label.given_at && label.given_at < messagesOf(result)) {
    text += ` (given on message ${label.given_at})`;
    title += `, given when the thread had ${label.given_at} message${label.given_at === 1 ? "" : "s"}`;
  }
  return { option: label.option, text, title };
}

function card(c, latencyMs, answer, labellable) {
  const rows = c.options.map((o, i) => {
    const chosen = o.id === c.choice;
    const answered = answer && answer.option === o.id;
    const value = Math.round(o.probability * 1000) / 10;
    const row = el("div", { class: "opt" + (chosen ? " chosen" : "") + (answered ? " answered" : ""),
                            "data-option": o.id },
      el("span", { class: "name", title: o.label },
        (i < 9 ? `${i + 1} ` : "") + (answered ? "✔ " : chosen ? "▸ " : "") + o.label),
      el("div", { class: "track", role: "progressbar", "aria-label": `${o.label} ${pct(o.probability)}`,
                  "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(value) },
        el("div", { class: "fill", width: `${value}%` })),
      el("span", { class: "pct" }, pct(o.probability)));
    if (labellable) {
      row.setAttribute("role", "button");
      row.setAttribute("aria-label", `label: ${o.label} is right (${pct(o.probability)})`);
      row.addEventListener("click", () => label(c.id, o.id));
    }
    return row;
  });
  const meta = el("div", { class: "meta" },
    el("span", { class: "choice" }, `choice: ${c.choice_label}`),
    el("span", { class: "source source-" + c.source }, `decided by: ${c.source}`),
    el("span", { class: "margin" }, `margin ${(c.margin * 100).toFixed(1)} pts`),
    el("span", { class: "latency", title: tailWords(c) }, `latency ${Math.round(latencyMs)} ms`));
  if (isShared(c)) meta.append(el("span", { class: "shared", title: tailWords(c) }, "shared decode"));
  const parts = [el("h3", {}, c.question), ...rows, meta];
  if (answer) parts.push(el("p", { class: "answer", title: answer.title }, answer.text));
  const attrs = { class: "card" + (answer ? " labelled" : ""), role: "listitem", id: "card-" + c.id,
                  "aria-label": c.question, "data-criterion": c.id };
  if (labellable) attrs.tabindex = "0";
  const node = el("article", attrs, ...parts);
  if (labellable) node.addEventListener("keydown", (e) => cardKey(e, c));
  return node;
}

function cardKey(e, c) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "Enter" || e.key === "y") { e.preventDefault(); label(c.id, c.choice); }
  else if (/^[1-9]$/.test(e.key)) {
    const o = c.options[Number(e.key) - 1];
    if (o) { e.preventDefault(); label(c.id, o.id); }
  } else if (e.key === "ArrowDown" || e.key === "ArrowRight") { e.preventDefault(); focusCard(c.id, 1, false); }
  else if (e.key === "ArrowUp" || e.key === "ArrowLeft") { e.preventDefault(); focusCard(c.id, -1, false); }
}

function focusCard(fromId, step, openOnly) {
  const cards = [...document.querySelectorAll("#cards article[tabindex]")];
  const at = cards.findIndex((n) => n.dataset.criterion === fromId);
  for (let i = at + step; i >= 0 && i < cards.length; i += step) {
    if (!openOnly || !cards[i].classList.contains("labelled")) { cards[i].focus(); return true; }
  }
  return false;
}

function showCard(c, latencyMs) {
  const cur = state.current;
  const labellable = Boolean(cur && cur.result && cur.kept && state.serverHistory);
  const node = card(c, latencyMs, cur && answerOf(c, cur.labels[c.id], cur.result || c.result), labellable);
  const old = $("card-" + c.id);
  if (old) old.replaceWith(node); else $("cards").append(node);
  return node;
}

async function label(criterion, option) {
  const cur = state.current;
  if (!cur || !cur.result) return;
  const { ok, status, data } = await api("POST", "/v1/label", { id: cur.id, labels: { [criterion]: option } });
  if (!ok) {
    say(`label not saved: ${explain(status, data)}`, true);
    return;
  }
  for (const s of data.stored) cur.labels[s.criterion] = { option: s.option, kind: s.kind, given_at: messagesOf(cur.result) };
  const c = cur.result.criteria.find((x) => x.id === criterion);
  const node = showCard(c, cur.latencies[c.id] ?? cur.result.timing.total_ms);
  const s = data.stored[0];
  say(`label saved: ${criterion} = ${s.option} (${s.kind})`);
  if (!focusCard(criterion, 1, true)) node.focus();
  remember();
}

function showTicket(t) {
  // t: {id, text, messages, pack, result, labels, latencies, kept}
  state.current = t;
  $("cards").replaceChildren();
  if (t.result) {
    for (const c of t.result.criteria) showCard(c, t.latencies[c.id] ?? t.result.timing.total_ms);
    $("total").textContent = `${t.id} · ${Math.round(t.result.timing.total_ms)} ms` +
      (t.messages ? ` · thread of ${t.messages.length}` : "");
  } else {
    $("total").textContent = `${t.id} · not scored to the end`;
  }
  drawNotes(t.result);
  drawKeys();
  drawThread();
}

function drawNotes(result) {
  // one note for the screen, not the same paragraph on every card; the research terms behind "details"
  const sources = new Set(result ? result.criteria.map((c) => c.source) : []);
  const notes = [...sources].filter((s) => SOURCE_NOTES[s]).map((s) => SOURCE_NOTES[s]);
  $("cards-note").textContent = notes.join(" ");
  $("cards-note").hidden = notes.length === 0;
  if (!result) { $("result-details").hidden = true; return; }
  const tk = result.tokens || {}, th = result.thread || {}, tm = result.timing || {};
  const shared = result.criteria.filter(isShared).map((c) => c.id);
  $("result-details").hidden = !info("result-info", [
    ["scored", `${result.mode || ""}${result.readout ? `, options read ${result.readout === "label" ? "by name" : result.readout}` : ""}`],
    ["prompt", tk.prefix !== undefined ? `prefix ${tk.prefix} tokens, ${tk.prefix_cached} cached` : null],
    ["time", tm.prefill_ms !== undefined ? `ticket read in ${Math.round(tm.prefill_ms)} ms, tails ${Math.round(tm.tails_ms)} ms` : null],
    ["shared decode", shared.length ? shared.join(", ") : null],
    ["thread", th.messages > 1 ? `${th.messages} messages, ${th.reused || 0} tokens reused` : null],
  ]);
}

function drawThread() {
  const t = state.current;
  $("reply-form").hidden = !(t && t.result);
  const messages = t ? (t.messages || [{ role: "customer", text: t.text }]) : [];
  $("thread").replaceChildren(...messages.map((m) =>
    el("li", { class: "msg role-" + m.role }, el("strong", {}, `${ROLES[m.role] || m.role}: `), m.text)));
}

function summary(result, labels) {
  // the agent's answer where there is one (✎ beside the model's where it corrected it), else the model's
  const pick = (c) => {
    const a = (labels || {})[c.id];
    if (!a) return `${c.id}=${c.choice}`;
    const model = a.option !== c.choice ? c.choice : a.kind === "correction" ? a.shown_option : null;
    return model && model !== a.option ? `${c.id}=${a.option} ✎ (model: ${model})` : `${c.id}=${a.option} ✓`;
  };
  const picks = result ? result.criteria.map(pick).join(", ") : "not scored";
  const n = Object.keys(labels || {}).length;
  return picks + (n ? ` · ${n} label${n === 1 ? "" : "s"} ✔` : "");
}

function remember() {
  // the tab's own list (used when the server keeps no history); the server's history is read back instead
  const cur = state.current;
  if (!cur || !cur.result) return;
  const entry = { id: cur.id, text: cur.text, messages: cur.messages, result: cur.result, labels: cur.labels,
                  latencies: cur.latencies, kept: cur.kept };
  state.session = [entry, ...state.session.filter((h) => h.id !== cur.id)].slice(0, 50);
  sessionStorage.setItem("triage.history", JSON.stringify(state.session));
  drawHistory();
}

async function drawHistory() {
  let entries = state.session;
  if (state.serverHistory) {
    const { ok, status, data } = await api("GET", "/v1/tickets?limit=50");
    if (!ok) { say(`the history could not be read: ${explain(status, data)}`, true); return; }
    entries = data.tickets.map((t) => ({ ...t, latencies: {}, kept: true }));
    const cur = state.current;
    const mine = cur && cur.result && !state.running && entries.find((t) => t.id === cur.id && t.result);
    if (mine && mine.result.created_at === cur.result.created_at) { // the labels the history holds now, on screen
      const key = (ls) => JSON.stringify(Object.keys(ls).sort().map((k) => [k, ls[k].option, ls[k].kind]));
      const changed = key(mine.labels) !== key(cur.labels); // another tab answered: redraw, keeping the focus
      cur.labels = { ...mine.labels };
      if (changed) {
        const focused = document.activeElement && document.activeElement.dataset.criterion;
        for (const c of cur.result.criteria) showCard(c, cur.latencies[c.id] ?? cur.result.timing.total_ms);
        if (focused && $("card-" + focused)) $("card-" + focused).focus();
      }
    }
  }
  $("history").replaceChildren(...entries.map((h) => {
    const b = el("button", { type: "button" }, `${h.id}: ${summary(h.result, h.labels)}`);
    b.addEventListener("click", async () => {
      if (h.summarised) { // the listing shows a long thread's ends, texts cut: the ticket whole, for a reply
        const { ok, status, data } = await api("GET", `/v1/tickets/${encodeURIComponent(h.id)}`);
        if (!ok) { say(`the ticket could not be read: ${explain(status, data)}`, true); return; }
        Object.assign(h, data.ticket, { summarised: false });
      }
      showTicket({ id: h.id, text: h.text, messages: h.messages, result: h.result, labels: { ...(h.labels || {}) },
                   latencies: h.latencies || {}, kept: Boolean(h.kept) });
      $("ticket-text").value = h.messages ? h.messages[0].text : h.text;
      $("ticket-id").value = h.id;
    });
    return el("li", {}, b);
  }));
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

async function send(body, ticket) {
  // POST body to /v1/score as an event stream; ticket: what goes on screen ({id, text, messages})
  if (state.running) return;
  if ($("token").value) sessionStorage.setItem("triage.token", $("token").value);
  const ctl = new AbortController();
  state.running = ctl;
  $("score").disabled = true; $("reply-send").disabled = true; $("stop").disabled = false;
  state.current = { ...ticket, pack: body.pack, result: null, labels: ticket.labels || {}, latencies: {},
                    kept: Boolean(body.history) };
  pendingCards(body.pack);
  drawNotes(null);
  $("total").textContent = "";
  say("queued…");
  const t0 = performance.now();
  const latencies = state.current.latencies;
  let ended = false;
  try {
    const r = await fetch("/v1/score", { method: "POST", signal: ctl.signal,
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }), body: JSON.stringify(body) });
    if (!r.ok) {
      const e = await r.json().catch(() => ({ error: r.statusText }));
      say(explain(r.status, e), true);
      stopCards(`not scored: ${e.error}`);
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
          ended = true;
          state.current.id = data.ticket_id;
          state.current.result = data;
          // a changed pack or prompt format: the server paid the stable block again, said once, with this result
          notice("stable", (data.warnings || []).find((w) => w.startsWith("stable prefix changed")) || "");
          showTicket(state.current);
          remember();
          say(`scored ${data.criteria.length} criteria in ${Math.round(performance.now() - t0)} ms` +
            (body.history && state.serverHistory ? "; Tab to a card: Enter confirms, 1-9 picks the right option" : ""));
        } else if (kind === "error") {
          ended = true;
          say(explain(data.status, data), true);
          stopCards(`not scored: ${data.error}`);
        }
      });
    }
    if (!ended) { say("the server closed the stream before the result", true); stopCards("stopped: no result came"); }
  } catch (e) {
    const aborted = e.name === "AbortError";
    const all = document.querySelectorAll("#cards article").length;
    const done = all - document.querySelectorAll("#cards article.pending").length;
    // a stop says what the score did before it: the cards it filled in stay, the rest were never decided
    say(aborted ? `stopped after ${done} of ${all} criteria; the others were not scored`
      : `failed: ${e.message}`, !aborted);
    stopCards(aborted ? "stopped: not scored" : "failed: not scored");
  } finally {
    state.running = null;
    $("score").disabled = false; $("reply-send").disabled = false; $("stop").disabled = true;
  }
}

function prefillSoon() {
  // the agent pastes or types: the next edit aborts the read-ahead in flight (the server stops it), and a
  // pause reads the box's ticket ahead, so that its score then costs only the tails and what changed since
  const p = state.prefill;
  clearTimeout(p.timer);
  if (p.ctl) { p.ctl.abort(); p.ctl = null; p.text = null; }
  p.timer = setTimeout(prefill, PREFILL_PAUSE_MS);
}

async function prefill() {
  const p = state.prefill;
  const text = $("ticket-text").value;
  const box = $("ticket-text");
  // read already, being scored, or nothing to read; a ticket on screen as it was scored is not read again
  if (!text.trim() || text === p.text || state.running ||
      (state.current && state.current.result && !state.current.messages && state.current.text === text)) return;
  const body = { text, pack: $("pack").value || undefined };
  if ($("ticket-id").value.trim()) body.id = $("ticket-id").value.trim();
  const ctl = new AbortController();
  p.ctl = ctl; p.text = text;
  delete box.dataset.readAhead;
  try {
    const r = await fetch("/v1/prefill", { method: "POST", signal: ctl.signal,
      headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) });
    const data = await r.json().catch(() => ({}));
    if (r.ok && data.complete) box.dataset.readAhead = String(data.tokens); // the tests read it; no noise on screen
    else if (r.status !== 409) p.text = null; // not read (a refusal, a cut): the next pause tries again
  } catch (e) {
    if (p.ctl === ctl) p.text = null; // the server is away: a score will say so
  } finally {
    if (p.ctl === ctl) p.ctl = null;
  }
}

function score(ev) {
  ev.preventDefault();
  const text = $("ticket-text").value;
  if (!text.trim()) { say("paste a ticket first", true); return; }
  const body = { text, pack: $("pack").value || undefined, history: state.serverHistory && $("keep").checked };
  if ($("ticket-id").value.trim()) body.id = $("ticket-id").value.trim();
  return send(body, { id: body.id || null, text, messages: null });
}

function reply(ev) {
  ev.preventDefault();
  const cur = state.current;
  const text = $("reply-text").value;
  if (!cur || !cur.result) return;
  if (!text.trim()) { say("write the reply first", true); return; }
  // the thread so far and the reply, under the same id: the server reads only the reply again
  const messages = [...(cur.messages || [{ role: "customer", text: cur.text }]), { role: $("reply-role").value, text }];
  const body = { id: cur.id, messages, pack: cur.pack || $("pack").value || undefined,
                 history: state.serverHistory && $("keep").checked };
  // the answers given so far stay the agent's over the reply, with the message count they were given on
  const at = messagesOf(cur.result);
  const labels = Object.fromEntries(Object.entries(cur.labels).map(([k, a]) => [k, { ...a, given_at: a.given_at || at }]));
  $("reply-text").value = "";
  return send(body, { id: cur.id, text: cur.text, messages, labels });
}

function stop() { if (state.running) state.running.abort(); }

document.addEventListener("DOMContentLoaded", () => {
  $("ticket-form").addEventListener("submit", score);
  $("reply-form").addEventListener("submit", reply);
  $("stop").addEventListener("click", stop);
  $("ticket-text").addEventListener("input", prefillSoon);
  $("ticket-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("ticket-form").requestSubmit();
  });
  $("reply-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("reply-form").requestSubmit();
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") stop(); });
  $("token").addEventListener("change", () => { sessionStorage.setItem("triage.token", $("token").value); loadHealth(); });
  loadHealth().catch((e) => say(`cannot reach the server: ${e.message}`, true));
});
