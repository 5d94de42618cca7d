// The Switchyard web view. Everything it shows comes from the page's own
// server (/api/...); text is always set with textContent, never parsed as
// HTML. The only markup inserted is the SVG Graphviz lays out from the DOT
// the server writes (every value quoted there).
import { Graphviz } from "./graphviz.js";

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "onclick") e.addEventListener("click", v);
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, opts = {}) {
  const r = await fetch(path, { credentials: "same-origin", ...opts });
  let body = {};
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) throw new Error(body.error || `${r.status} ${r.statusText}`);
  return body;
}

function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Switchyard": "1" },
    body: JSON.stringify(body),
  });
}

const view = {
  session: null,      // the selected session id
  detail: null,       // its last SessionView
  dot: "",            // the DOT laid out
  es: null,           // its EventSource
  selected: null,     // the selected node
  kinds: new Set(),
  events: 0,
};

let graphviz = null;
const graphvizReady = Graphviz.load().then((g) => { graphviz = g; }).catch((err) => {
  $("#graph").replaceChildren(el("p", { class: "error-box" }, "The graph cannot be drawn here (" + err + "); the table below has every node."));
});

function usageText(u) {
  if (!u || (!u.input_tokens && !u.output_tokens && !u.cost)) return "";
  return `${u.input_tokens}/${u.output_tokens} tok $${u.cost.toFixed(4)}`;
}

// ---- sessions ----

async function loadSessions() {
  let list;
  try { list = await api("/api/sessions"); } catch (err) { showConn("sessions: " + err.message); return; }
  const ul = $("#sessions");
  ul.replaceChildren(...list.map((s) => el("li", {
    class: s.id === view.session ? "current" : "",
    "data-session": s.id,
    onclick: () => selectSession(s.id),
  }, el("div", { class: "id" }, s.id), el("div", {}, s.graph || s.file || "", " ", el("span", { class: "badge " + s.status }, s.status)),
    s.waiting ? el("div", { class: "muted" }, `${s.waiting} gate(s) waiting`) : null)));
  if (!view.session && list.length) {
    const fromHash = new URLSearchParams(location.hash.slice(1)).get("s");
    const pick = list.find((s) => s.id === fromHash) || list.find((s) => s.status === "running") || list[0];
    selectSession(pick.id);
  }
}

function selectSession(id) {
  if (view.es) view.es.close();
  view.session = id;
  view.detail = null;
  view.dot = "";
  view.selected = null;
  view.kinds = new Set();
  view.events = 0;
  history.replaceState(null, "", "#s=" + encodeURIComponent(id));
  $("#events").replaceChildren();
  $("#kind-filter").replaceChildren(el("option", { value: "" }, "all kinds"));
  $("#node-panel").replaceChildren(el("h2", {}, "Node"), el("p", { class: "muted" }, "Select a node in the graph or the table."));
  for (const li of document.querySelectorAll("#sessions li")) li.classList.toggle("current", li.dataset.session === id);
  openEvents(id);
  refresh();
  loadCheckpoints();
}

// ---- live events ----

function showConn(text) { $("#conn").textContent = text; }

function openEvents(id) {
  const es = new EventSource(`/api/sessions/${encodeURIComponent(id)}/events`);
  view.es = es;
  es.addEventListener("open", () => showConn("live"));
  es.addEventListener("error", () => showConn("reconnecting…"));
  es.addEventListener("event", (m) => {
    if (view.session !== id) return;
    const ev = JSON.parse(m.data);
    addEvent(ev);
    scheduleRefresh();
    if (ev.kind === "checkpoint.saved") scheduleCheckpoints();
    if (ev.kind.startsWith("session.")) loadSessions();
  });
}

function addEvent(ev) {
  const t = ev.time ? new Date(ev.time).toLocaleTimeString([], { hour12: false }) + "." + String(new Date(ev.time).getMilliseconds()).padStart(3, "0") : "";
  const li = el("li", { class: ev.status === "fail" ? "fail" : "", title: JSON.stringify(ev) },
    el("span", { class: "t muted" }, t + "  "), el("span", { class: "k" }, ev.kind), el("span", { class: "n" }, ev.node || ""),
    " ", ev.status || "", " ", ev.message ? ev.message.split("\n")[0] : "");
  li.dataset.kind = ev.kind;
  li.dataset.text = [ev.kind, ev.node, ev.status, ev.message, ev.edge].join(" ").toLowerCase();
  applyFilter(li);
  const list = $("#events");
  const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
  list.append(li);
  while (list.children.length > 1000) list.firstChild.remove();
  if (atBottom) list.scrollTop = list.scrollHeight;
  view.events++;
  $("#event-count").textContent = `${view.events} events`;
  if (!view.kinds.has(ev.kind)) {
    view.kinds.add(ev.kind);
    const sel = $("#kind-filter");
    const opts = [...view.kinds].sort();
    const cur = sel.value;
    sel.replaceChildren(el("option", { value: "" }, "all kinds"), ...opts.map((k) => el("option", { value: k }, k)));
    sel.value = cur;
  }
}

function applyFilter(li) {
  const text = $("#filter").value.trim().toLowerCase();
  const kind = $("#kind-filter").value;
  const show = (!kind || li.dataset.kind === kind) && (!text || li.dataset.text.includes(text));
  li.classList.toggle("hidden", !show);
}

function refilter() { for (const li of $("#events").children) applyFilter(li); }
$("#filter").addEventListener("input", refilter);
$("#kind-filter").addEventListener("change", refilter);

// ---- the session ----

let refreshTimer = null;
function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, 120);
}

async function refresh() {
  const id = view.session;
  if (!id) return;
  let v;
  try { v = await api(`/api/sessions/${encodeURIComponent(id)}`); } catch (err) { showConn(err.message); return; }
  if (view.session !== id) return;
  view.detail = v;
  $("#session-title").textContent = `${v.graph || ""} · ${v.id}`;
  const st = $("#session-status");
  st.textContent = v.status;
  st.className = "badge " + v.status;
  $("#session-usage").textContent = usageText(v.usage) ? "usage " + usageText(v.usage) : "";
  await drawGraph(v);
  renderNodes(v);
  renderGates(v);
  renderBudgets(v);
  renderBuffers(v);
}

async function drawGraph(v) {
  await graphvizReady;
  if (!graphviz || !v.dot) return;
  if (v.dot !== view.dot) {
    view.dot = v.dot;
    const svg = graphviz.dot(v.dot, "svg");
    const holder = $("#graph");
    holder.innerHTML = svg;
    // A graph a little taller than the view is scaled to fit; a big one
    // keeps a readable size and scrolls.
    const svgEl = holder.querySelector("svg");
    if (svgEl) {
      const h = svgEl.height.baseVal.value;
      svgEl.classList.toggle("fit", h > 0 && 560 / h >= 0.6);
    }
    for (const g of holder.querySelectorAll("g.node")) {
      const id = g.id.replace(/^node_/, "");
      g.dataset.node = id;
      g.addEventListener("click", () => selectNode(id));
    }
  }
  for (const n of v.nodes) {
    const g = document.getElementById("node_" + n.id);
    if (!g) continue;
    g.setAttribute("class", `node state-${n.state}` + (n.id === view.selected ? " selected" : ""));
    const title = g.querySelector("title");
    if (title) title.textContent = `${n.id}: ${n.state}${n.reason ? " — " + n.reason : ""}`;
  }
  const busy = new Map();
  for (const b of v.buffers) if (b.edge) busy.set(b.edge, b);
  for (const g of document.querySelectorAll("#graph g.edge")) {
    const b = busy.get(g.id.replace(/^edge_/, ""));
    g.classList.toggle("busy", !!(b && b.held > 0));
    const title = g.querySelector("title");
    if (title && b) title.textContent = `${b.edge}: ${b.ready} ready, ${b.held} held, ${b.dropped} dropped`;
  }
}

// renderNodes updates the table in place: a row, and the Trigger button in
// it, stays the same element across refreshes, so a click that lands while
// the page refreshes is not lost with a replaced button.
function renderNodes(v) {
  const body = $("#nodes tbody");
  const have = new Map([...body.querySelectorAll("tr[data-node]")].map((tr) => [tr.dataset.node, tr]));
  const rows = v.nodes.map((n) => {
    let tr = have.get(n.id);
    if (!tr || (tr.querySelector("button[data-trigger-node]") !== null) !== !!n.manual) {
      const actions = [];
      if (n.manual) actions.push(el("button", { "data-trigger-node": n.id, onclick: (e) => { e.stopPropagation(); trigger(n.id); } }, "Trigger"));
      tr = el("tr", { "data-node": n.id, onclick: () => selectNode(n.id) },
        el("td", {}, n.id), el("td", { class: "muted" }, ""), el("td", {}, ""), el("td", { class: "reason" }, ""),
        el("td", { class: "num" }, ""), el("td", { class: "last" }, ""), el("td", {}, ""), el("td", {}, ...actions));
    }
    const td = tr.children;
    tr.dataset.state = n.state;
    tr.dataset.last = n.last || "";
    tr.dataset.runs = String(n.runs);
    tr.className = n.id === view.selected ? "selected" : "";
    td[1].textContent = n.type;
    td[2].className = "state state-" + n.state;
    td[2].textContent = n.state;
    td[3].textContent = n.reason || "";
    td[4].textContent = String(n.runs);
    td[5].textContent = n.last || "";
    td[6].textContent = usageText(n.usage);
    return tr;
  });
  const same = rows.length === body.children.length && rows.every((tr, i) => body.children[i] === tr);
  if (!same) body.replaceChildren(...rows);
}

// renderGates keeps a gate's panel while its question stays the same: what
// a person is typing into a free-text answer survives the refreshes.
function renderGates(v) {
  const box = $("#gates");
  const have = new Map([...box.querySelectorAll("div.gate")].map((d) => [d.dataset.gate, d]));
  const panels = v.nodes.filter((n) => n.question).map((n) => {
    const key = JSON.stringify([n.question.text, (n.question.options || []).map((o) => [o.key, o.label])]);
    const old = have.get(n.id);
    if (old && old.dataset.question === key) return old;
    return el("div", { class: "gate", "data-gate": n.id, "data-question": key },
      el("div", { class: "q" }, `${n.id} is waiting for an answer: ${n.question.text}`),
      ...(n.question.options && n.question.options.length ? n.question.options.map((o) => el("button", {
        class: "primary", "data-answer-node": n.id, "data-choice": o.key, onclick: () => answer(n.id, o.key),
      }, o.label)) : [freeAnswer(n.id)]),
      el("span", { class: "result muted" }));
  });
  const same = panels.length === box.children.length && panels.every((d, i) => box.children[i] === d);
  if (!same) box.replaceChildren(...panels);
}

function freeAnswer(node) {
  const input = el("input", { type: "text", placeholder: "your answer", "data-answer-input": node });
  const form = el("form", {}, input, " ", el("button", { class: "primary", type: "submit" }, "Answer"));
  form.addEventListener("submit", (e) => { e.preventDefault(); answer(node, input.value); });
  return form;
}

async function answer(node, choice) {
  const box = document.querySelector(`#gates [data-gate="${CSS.escape(node)}"] .result`);
  try {
    await post(`/api/sessions/${encodeURIComponent(view.session)}/answer`, { node, choice });
    if (box) box.textContent = "answered " + choice;
  } catch (err) {
    if (box) box.textContent = err.message;
  }
  scheduleRefresh();
}

async function trigger(node) {
  try {
    await post(`/api/sessions/${encodeURIComponent(view.session)}/trigger`, { node });
    showConn("triggered " + node);
  } catch (err) {
    showConn("trigger " + node + ": " + err.message);
  }
  scheduleRefresh();
}

function renderBudgets(v) {
  const fmt = (d, x) => d === "cost" ? "$" + x.toFixed(4) : d === "time" ? x.toFixed(1) + "s" : String(Math.round(x));
  const rows = v.budgets.map((b) => {
    const pct = Math.min(100, b.limit ? (100 * b.spent) / b.limit : 0);
    return el("tr", {}, el("td", {}, b.scope), el("td", {}, b.dimension),
      el("td", {}, `${fmt(b.dimension, b.spent)} / ${fmt(b.dimension, b.limit)} (${pct.toFixed(0)}%)`,
        el("div", { class: "bar" + (pct >= 80 ? " hot" : "") }, el("span", { style: `width:${pct}%` }))));
  });
  $("#budgets tbody").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 3, class: "muted" }, "no budget set"))]));
}

function renderBuffers(v) {
  const rows = v.buffers.filter((b) => b.edge || b.held || b.dropped).map((b) => el("tr", { "data-edge": b.edge },
    el("td", {}, b.node), el("td", {}, b.edge || "(inbox)"), el("td", { class: "num" }, b.ready),
    el("td", { class: "num" }, b.held), el("td", { class: "num" }, b.dropped)));
  $("#buffers tbody").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "no edges"))]));
}

let checkpointTimer = null;
function scheduleCheckpoints() {
  if (checkpointTimer) return;
  checkpointTimer = setTimeout(() => { checkpointTimer = null; loadCheckpoints(); }, 500);
}

async function loadCheckpoints() {
  const id = view.session;
  let list = [];
  try { list = await api(`/api/sessions/${encodeURIComponent(id)}/checkpoints`); } catch (err) {
    $("#checkpoints tbody").replaceChildren(el("tr", {}, el("td", { colSpan: 4, class: "muted" }, err.message)));
    return;
  }
  if (view.session !== id) return;
  const rows = list.slice(-50).reverse().map((c) => el("tr", { "data-checkpoint": c.seq },
    el("td", { class: "num" }, c.seq), el("td", {}, new Date(c.time).toLocaleTimeString([], { hour12: false })),
    el("td", {}, c.node || ""), el("td", {}, c.status || c.terminal || "")));
  $("#checkpoints tbody").replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colSpan: 4, class: "muted" }, "none (not a durable session, or nothing recorded yet)"))]));
}

// ---- a node ----

async function selectNode(id) {
  view.selected = id;
  for (const g of document.querySelectorAll("#graph g.node")) g.classList.toggle("selected", g.dataset.node === id);
  for (const tr of document.querySelectorAll("#nodes tr[data-node]")) tr.classList.toggle("selected", tr.dataset.node === id);
  const panel = $("#node-panel");
  let d;
  try { d = await api(`/api/sessions/${encodeURIComponent(view.session)}/nodes/${encodeURIComponent(id)}`); } catch (err) {
    panel.replaceChildren(el("h2", {}, "Node " + id), el("p", { class: "error-box" }, err.message));
    return;
  }
  const n = view.detail && view.detail.nodes.find((x) => x.id === id);
  const content = el("pre", { "data-file-content": "" });
  content.hidden = true;
  const files = d.files.map((f) => el("button", { "data-file": f.name, onclick: () => showFile(id, f.name, content) }, `${f.name} (${f.size} B)`));
  panel.replaceChildren(
    el("h2", {}, "Node " + id),
    n && n.manual ? el("p", {}, el("button", { class: "primary", "data-trigger-node": id, onclick: () => trigger(id) }, "Trigger " + id)) : null,
    el("pre", { "data-explain": id }, d.explain || ""),
    el("div", { class: "files" }, ...(files.length ? files : [el("span", { class: "muted" }, "no files yet")])),
    content);
}

async function showFile(node, name, pre) {
  const r = await fetch(`/api/sessions/${encodeURIComponent(view.session)}/nodes/${encodeURIComponent(node)}/files/${encodeURIComponent(name)}`, { credentials: "same-origin" });
  pre.hidden = false;
  pre.textContent = r.ok ? await r.text() : `${name}: ${r.status} ${r.statusText}`;
}

// ---- start ----

loadSessions();
setInterval(loadSessions, 5000);
// States that change without an event (cron times, budgets over time).
setInterval(() => { if (!document.hidden) refresh(); }, 3000);
