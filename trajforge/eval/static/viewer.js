// trajforge viewer page: filters → /api/episodes (paged list) → /api/episode (conversation HTML).
// Text from the store is put into the page with textContent only; the one innerHTML is the
// conversation HTML the server rendered with everything escaped (trajforge/eval/conversation.py).
// body[data-list-version] and body[data-open-version] count finished loads, for tests to wait on.
"use strict";

const FILTERS = ["policy", "outcome_tier", "fail_reason", "env", "tier", "split"];
const state = { page: 1, perPage: 50, total: 0, open: null };

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function setStatus(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("error", Boolean(isError));
}

function bump(name) {
  const ds = document.body.dataset;
  ds[name] = String(Number(ds[name] || "0") + 1);
}

async function getJSON(path, params) {
  const url = path + (params ? "?" + new URLSearchParams(params).toString() : "");
  const resp = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await resp.json().catch(() => ({ error: "HTTP " + resp.status + " (not JSON)" }));
  if (!resp.ok) throw new Error(body.error || "HTTP " + resp.status);
  return body;
}

function filterParams() {
  const params = {};
  const task = document.getElementById("f-task_id").value.trim();
  if (task) params.task_id = task;
  for (const name of FILTERS) {
    const value = document.getElementById("f-" + name).value;
    if (value) params[name] = value;
  }
  return params;
}

async function loadFacets() {
  const data = await getJSON("/api/facets");
  const skipped = Object.values(data.unreadable || {}).reduce((a, b) => a + b, 0);
  document.getElementById("store").textContent = data.store + " · " + data.total + " episodes" +
    (skipped ? " · " + skipped + " unreadable lines skipped" : "");
  for (const name of FILTERS) {
    const select = document.getElementById("f-" + name);
    select.replaceChildren(el("option", "any"));
    select.firstChild.value = "";
    for (const { value, n } of data.columns[name] || []) {
      const opt = el("option", value + " (" + n + ")");
      opt.value = value;
      select.appendChild(opt);
    }
  }
}

function cell(row, text, cls) {
  row.appendChild(el("td", text, cls));
}

function renderList(data) {
  const body = document.querySelector("#episodes tbody");
  body.replaceChildren();
  for (const r of data.rows) {
    const tr = el("tr");
    tr.dataset.taskId = r.task_id;
    tr.dataset.policy = r.policy;
    tr.dataset.sample = String(r.sample);
    const task = el("td", r.task_id, "task");
    task.title = r.task_id;
    tr.appendChild(task);
    cell(tr, r.policy);
    cell(tr, r.sample, "num");
    cell(tr, r.tier);
    const outcome = el("td");
    outcome.appendChild(el("span", r.outcome_tier || "ungraded", "badge tier-" + (r.outcome_tier || "ungraded")));
    tr.appendChild(outcome);
    cell(tr, r.fail_reason || "");
    cell(tr, r.turns, "num");
    cell(tr, r.n_errors, "num");
    cell(tr, r.n_repairs, "num");
    cell(tr, r.reward_total === null ? "" : Number(r.reward_total).toFixed(3), "num");
    if (state.open && state.open.task_id === r.task_id && state.open.policy === r.policy &&
        state.open.sample === r.sample) tr.classList.add("open");
    tr.addEventListener("click", () => openEpisode(r.task_id, r.policy, r.sample, "left"));
    body.appendChild(tr);
  }
  const pages = Math.max(1, Math.ceil(data.total / data.per_page));
  document.getElementById("page-info").textContent =
    "page " + data.page + " of " + pages + " · " + data.total + " episodes";
  document.getElementById("prev").disabled = data.page <= 1;
  document.getElementById("next").disabled = data.page >= pages;
}

async function loadList() {
  setStatus("loading…");
  try {
    const data = await getJSON("/api/episodes", { ...filterParams(), page: state.page, per_page: state.perPage });
    state.total = data.total;
    renderList(data);
    setStatus("");
  } catch (err) {
    setStatus(err.message, true);
  }
  bump("listVersion");
}

function paneBar(pane, data, side) {
  const bar = el("div", null, "pane-bar");
  const ep = data.episode;
  const others = data.siblings.filter((s) => !(s.policy === ep.policy && s.sample === ep.sample));
  if (others.length) bar.appendChild(el("span", "compare with:"));
  for (const s of others) {
    const b = el("button", s.policy + " #" + s.sample + " (" + (s.outcome_tier || "ungraded") + ")", "compare");
    b.type = "button";
    b.dataset.policy = s.policy;
    b.addEventListener("click", () => openEpisode(ep.task_id, s.policy, s.sample, side === "left" ? "right" : "left"));
    bar.appendChild(b);
  }
  if (side === "right") {
    const close = el("button", "close", "close");
    close.type = "button";
    close.addEventListener("click", () => {
      pane.hidden = true;
      pane.replaceChildren();
      document.getElementById("panes").classList.remove("two");
    });
    bar.appendChild(close);
  }
  return bar;
}

async function openEpisode(taskId, policy, sample, side) {
  const pane = document.getElementById("pane-" + side);
  setStatus("opening…");
  try {
    const data = await getJSON("/api/episode", { task_id: taskId, policy: policy, sample: sample });
    const conv = el("div", null, "conversation");
    conv.innerHTML = data.html; // rendered and escaped by the server
    pane.replaceChildren(paneBar(pane, data, side), conv);
    pane.hidden = false;
    pane.dataset.taskId = taskId;
    pane.dataset.policy = policy;
    if (side === "left") {
      state.open = { task_id: taskId, policy: policy, sample: sample };
      for (const tr of document.querySelectorAll("#episodes tbody tr")) {
        tr.classList.toggle("open", tr.dataset.taskId === taskId && tr.dataset.policy === policy &&
          tr.dataset.sample === String(sample));
      }
    } else {
      document.getElementById("panes").classList.add("two");
    }
    setStatus("");
  } catch (err) {
    setStatus(err.message, true);
  }
  bump("openVersion");
}

function refilter() {
  state.page = 1;
  loadList();
}

function setup() {
  for (const name of FILTERS) document.getElementById("f-" + name).addEventListener("change", refilter);
  let timer = null;
  document.getElementById("f-task_id").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(refilter, 250);
  });
  document.getElementById("filters").addEventListener("submit", (e) => { e.preventDefault(); refilter(); });
  document.getElementById("reset").addEventListener("click", () => setTimeout(refilter, 0));
  document.getElementById("prev").addEventListener("click", () => { state.page -= 1; loadList(); });
  document.getElementById("next").addEventListener("click", () => { state.page += 1; loadList(); });
  loadFacets().then(loadList, (err) => { setStatus(err.message, true); bump("listVersion"); });
}

document.addEventListener("DOMContentLoaded", setup);
