// statcurator web console: plain JS over the /v1 API, no build step. Every dynamic text is
// set with textContent (never innerHTML); the token lives in sessionStorage only.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let state = { token: sessionStorage.getItem("statcurator-token"), me: null, datasets: [] };

function frac(text) {  // exact text ("1/3", "10") -> number, for display only
  if (text === null || text === undefined) return NaN;
  const [a, b] = String(text).split("/");
  return b === undefined ? Number(a) : Number(a) / Number(b);
}
function fmt(x, digits = 4) {
  if (x === null || x === undefined || Number.isNaN(x)) return "";
  return typeof x === "number" ? String(Number(x.toPrecision(digits + 2))) : String(x);
}
function loss(d) {
  if (!d) return "none";
  return Object.entries(d).map(([k, v]) => `${{epsilon: "ε", delta: "δ", rho: "ρ"}[k] || k}=${fmt(frac(v))}`).join(", ");
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function table(node, heads, rows, numeric = []) {
  node.replaceChildren();
  const tr = el("tr");
  heads.forEach((h) => tr.append(el("th", h)));
  node.append(tr);
  for (const r of rows) {
    const row = el("tr");
    r.forEach((c, i) => {
      if (c instanceof Node) { const td = el("td"); td.append(c); row.append(td); }
      else row.append(el("td", c, numeric.includes(i) ? "num" : undefined));
    });
    node.append(row);
  }
}

class ApiError extends Error {
  constructor(doc, status) { super(doc.detail || `HTTP ${status}`); this.doc = doc; this.status = status; }
}
async function api(method, path, body, extraHeaders) {
  const headers = { "Authorization": `Bearer ${state.token}`, ...(extraHeaders || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const doc = await r.json().catch(() => ({ detail: `HTTP ${r.status}` }));
  if (!r.ok) throw new ApiError(doc, r.status);
  return doc;
}
function showError(node, err) {
  node.replaceChildren();
  if (!err) return;
  node.append(el("span", err.message));
  if (err.doc && err.doc.remedy) node.append(el("span", err.doc.remedy, "remedy"));
}

// -- sign in ----------------------------------------------------------------------------------
async function signIn(token) {
  state.token = token;
  try {
    state.me = await api("GET", "/v1/me");
  } catch (err) {
    state.token = null;
    sessionStorage.removeItem("statcurator-token");
    showError($("signin-error"), err);
    return;
  }
  sessionStorage.setItem("statcurator-token", token);
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  $("who").textContent = `${state.me.analyst} (${state.me.role})`;
  $("admin-tab").hidden = state.me.role !== "admin";
  await loadDatasets();
}
$("signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("token").value.trim()); });
$("signout").addEventListener("click", () => { sessionStorage.removeItem("statcurator-token"); location.reload(); });

document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => {
  document.querySelectorAll(".tab").forEach((x) => x.classList.toggle("active", x === b));
  document.querySelectorAll(".tab-page").forEach((p) => { p.hidden = p.id !== `tab-${b.dataset.tab}`; });
  if (b.dataset.tab === "history") loadHistory();
  if (b.dataset.tab === "admin") loadAdmin();
}));

// -- datasets and schema --------------------------------------------------------------------------
async function loadDatasets() {
  state.datasets = (await api("GET", "/v1/datasets")).datasets;
  const sel = $("dataset");
  sel.replaceChildren(...state.datasets.map((d) => el("option", d.name)));
  showDataset();
}
function current() { return state.datasets.find((d) => d.name === $("dataset").value); }
function showDataset() {
  const d = current();
  if (!d) return;
  $("dataset-desc").textContent = d.description || "";
  table($("schema"), ["column", "type", "bounds", "categories (public)"], d.columns.map((c) => [
    c.name, c.type, c.bounds ? `[${c.bounds.map(frac).join(", ")}]` : "",
    c.categories ? c.categories.slice(0, 8).join(", ") + (c.categories.length > 8 ? `, … (${c.categories.length})` : "") : ""]));
  const numeric = d.columns.filter((c) => c.bounds);
  const grouped = d.columns.filter((c) => c.categories);
  $("column").replaceChildren(el("option", "(rows)"), ...numeric.map((c) => el("option", c.name)));
  $("groupby").replaceChildren(el("option", "(nothing)"), ...grouped.map((c) => el("option", c.name)));
  gauge(d.budget);
}
$("dataset").addEventListener("change", showDataset);

function quote(name) { return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`; }
$("builder").addEventListener("submit", (e) => {
  e.preventDefault();
  const d = current(), agg = $("agg").value, col = $("column").value, by = $("groupby").value;
  const fn = { count: "COUNT", sum: "SUM", mean: "AVG", median: "MEDIAN" }[agg];
  const arg = agg === "count" || col === "(rows)" ? "*" : quote(col);
  const target = fn === "COUNT" ? "COUNT(*)" : `${fn}(${arg === "*" ? quote(d.columns.find((c) => c.bounds).name) : arg})`;
  const alias = agg === "count" ? "n" : agg;
  const keys = by === "(nothing)" ? "" : `${quote(by)}, `;
  $("sql").value = `SELECT ${keys}${target} AS ${alias} FROM ${quote(d.name)}` + (keys ? ` GROUP BY ${quote(by)}` : "");
});

// -- budget gauge -------------------------------------------------------------------------------
function gauge(budget) {
  const g = $("gauge");
  g.replaceChildren();
  const mine = budget && budget.analyst;
  const total = mine ? frac(mine.total.epsilon ?? mine.total.rho) : 0;
  const left = mine ? frac(mine.remaining.epsilon ?? mine.remaining.rho) : 0;
  const share = total > 0 ? Math.max(0, Math.min(1, left / total)) : 0;
  const arc = (from, to) => {
    const p = (t) => [110 - 90 * Math.cos(Math.PI * t), 115 - 90 * Math.sin(Math.PI * t)];
    const [x0, y0] = p(from), [x1, y1] = p(to);
    return `M ${x0} ${y0} A 90 90 0 ${to - from > 0.5 ? 1 : 0} 1 ${x1} ${y1}`;
  };
  g.append(svg("path", { d: arc(0, 1), class: "gauge-bg" }));
  if (share > 0) g.append(svg("path", { d: arc(0, Math.min(share, 0.9999)), class: "gauge-fg", "data-share": share.toFixed(4) }));
  g.append(svg("text", { x: 110, y: 105, class: "gauge-text" }, mine ? `${fmt(left, 3)} / ${fmt(total, 3)}` : "no grant"));
  $("budget-text").textContent = mine
    ? `Your grant: ${mine.text}. The dataset has ${loss(budget.dataset_remaining)} left for everyone.`
    : "You have no grant on this dataset: ask the curator.";
}
async function refreshBudget() {
  const d = await api("GET", `/v1/datasets/${encodeURIComponent($("dataset").value)}`);
  const i = state.datasets.findIndex((x) => x.name === d.name);
  state.datasets[i] = d;
  gauge(d.budget);
}

// -- dry run and run ------------------------------------------------------------------------------
function queryBody() {
  const body = { sql: $("sql").value, epsilon: $("epsilon").value.trim() };
  if ($("delta").value.trim()) body.delta = $("delta").value.trim();
  const alpha = Number($("alpha").value);
  if ($("alpha").value.trim()) body.alpha = Number.isFinite(alpha) ? alpha : $("alpha").value;
  return body;
}
$("dryrun").addEventListener("click", async () => {
  showError($("query-error"));
  const out = $("estimate");
  out.replaceChildren();
  try {
    const r = await api("POST", "/v1/queries/dry-run", queryBody());
    out.append(el("p", `Cost ${r.cost_text} — nothing spent yet. ` +
      (r.budget.analyst ? `You have ${loss(r.budget.analyst.remaining)} left; ` : "You have no grant; ") +
      `the dataset has ${loss(r.budget.dataset_remaining)} left.` + (r.fits ? "" : " This query does not fit.")));
    const t = el("table", undefined, "data");
    t.id = "accuracy";
    table(t, ["output", "aggregate", "mechanism", `±${Math.round((1 - r.alpha) * 100)}%`], r.accuracy.map((a) => [
      a.output, a.aggregate, a.mechanism,
      a.halfwidth !== null && a.halfwidth !== undefined ? fmt(a.halfwidth) :
        a.rank_error !== undefined ? `rank ±${fmt(a.rank_error)}` : "depends on n"]), [3]);
    out.append(t);
  } catch (err) { showError($("query-error"), err); }
});
$("run").addEventListener("click", async () => {
  showError($("query-error"));
  try {
    const r = await api("POST", "/v1/queries", queryBody(), { "Idempotency-Key": crypto.randomUUID() });
    showAnswer(r.release, r.replayed, r.request_id);
    gauge(r.budget);
  } catch (err) { showError($("query-error"), err); }
});

function showAnswer(rel, replayed, rid) {
  $("answer-card").hidden = false;
  const cols = rel.columns;
  const noisy = cols.filter((c) => cols.includes(`${c}_low`) && cols.includes(`${c}_high`));
  const shown = cols.filter((c) => !noisy.some((n) => c === `${n}_low` || c === `${n}_high`));
  const heads = [];
  shown.forEach((c) => { heads.push(c); if (noisy.includes(c)) heads.push(`${c} interval (${Math.round((1 - rel.alpha) * 100)}%)`); });
  const rows = rel.rows.map((r) => {
    const rec = Object.fromEntries(cols.map((c, i) => [c, r[i]]));
    const out = [];
    shown.forEach((c) => { out.push(fmt(rec[c], 6)); if (noisy.includes(c)) out.push(`[${fmt(rec[`${c}_low`], 6)}, ${fmt(rec[`${c}_high`], 6)}]`); });
    return out;
  });
  table($("answer"), heads, rows);
  $("answer-meta").textContent = `request ${rid} — cost ${loss(rel.cost)}` + (replayed ? " (stored answer: no new cost)" : "");
  chart(rel, noisy[0], shown.find((c) => !noisy.includes(c)));
}

function chart(rel, value, key) {
  const g = $("chart");
  g.replaceChildren();
  if (!value) { g.setAttribute("height", 0); return; }
  g.setAttribute("height", 260);
  const cols = rel.columns, at = (c) => cols.indexOf(c);
  const data = rel.rows.map((r, i) => ({ label: key ? String(r[at(key)]) : String(i + 1),
    v: Number(r[at(value)]), lo: Number(r[at(`${value}_low`)]), hi: Number(r[at(`${value}_high`)]) }));
  const W = 640, H = 260, left = 60, bottom = 40, top = 16;
  const max = Math.max(...data.map((d) => Math.max(d.hi, d.v, 0)), 1e-9);
  const min = Math.min(0, ...data.map((d) => Math.min(d.lo, d.v)));
  const y = (v) => top + (H - top - bottom) * (1 - (v - min) / (max - min || 1));
  const bw = (W - left - 10) / Math.max(data.length, 1);
  g.append(svg("line", { x1: left, y1: y(0), x2: W - 5, y2: y(0), class: "axis" }));
  g.append(svg("text", { x: 4, y: top + 10, class: "label" }, fmt(max, 3)));
  g.append(svg("text", { x: 4, y: y(0), class: "label" }, fmt(0)));
  data.forEach((d, i) => {
    const x = left + i * bw + bw * 0.15, w = bw * 0.7;
    const bar = svg("rect", { x, y: Math.min(y(d.v), y(0)), width: w, height: Math.abs(y(0) - y(d.v)), class: "bar" });
    bar.append(svg("title", {}, `${d.label}: ${fmt(d.v, 6)} [${fmt(d.lo, 6)}, ${fmt(d.hi, 6)}]`));
    g.append(bar);
    const cx = x + w / 2;
    g.append(svg("line", { x1: cx, y1: y(d.lo), x2: cx, y2: y(d.hi), class: "whisker" }));
    g.append(svg("line", { x1: cx - 6, y1: y(d.lo), x2: cx + 6, y2: y(d.lo), class: "whisker" }));
    g.append(svg("line", { x1: cx - 6, y1: y(d.hi), x2: cx + 6, y2: y(d.hi), class: "whisker" }));
    g.append(svg("text", { x: cx, y: H - bottom + 14, class: "label", "text-anchor": "middle" }, d.label.slice(0, 14)));
  });
  g.append(svg("text", { x: left, y: H - 6, class: "label" }, `${value} with its interval`));
}

// -- history --------------------------------------------------------------------------------------
async function loadHistory() {
  try {
    const r = await api("GET", "/v1/releases");
    table($("history"), ["time", "dataset", "query", "cost", ""], r.releases.map((x) => {
      const b = el("button", x.answered ? "show" : "lost");
      b.disabled = !x.answered;
      b.addEventListener("click", async () => {
        const s = await api("GET", `/v1/releases/${encodeURIComponent(x.request_id)}`);
        document.querySelector('[data-tab="query"]').click();
        showAnswer(s.release, true, x.request_id);
      });
      return [x.at, x.dataset, x.query, x.cost_text, b];
    }));
  } catch (err) { showError($("query-error"), err); }
}

// -- the curator's view ---------------------------------------------------------------------------
async function loadAdmin() {
  showError($("admin-error"));
  try {
    const [b, a] = await Promise.all([api("GET", "/v1/admin/budgets"), api("GET", "/v1/admin/analysts")]);
    table($("admin-datasets"), ["dataset", "total", "spent", "remaining", "charges"],
      b.datasets.map((d) => [d.dataset, loss(d.total), loss(d.spent), loss(d.remaining), d.charges]), [4]);
    table($("admin-analysts"), ["analyst", "role", "token", "grants"], a.analysts.map((x) => [
      x.analyst, x.role, x.revoked ? "revoked" : `${x.token_hint}…`, x.grants.map((g) => `${g.dataset}: ${loss(g.remaining)} left of ${loss(g.total)}`).join("; ")]));
    const names = state.datasets.map((d) => d.name);
    for (const id of ["db-dataset", "grant-dataset", "anon-dataset"]) $(id).replaceChildren(...names.map((n) => el("option", n)));
    $("grant-analyst").replaceChildren(...a.analysts.map((x) => el("option", x.analyst)));
    $("access-analyst").replaceChildren(...a.analysts.map((x) => el("option", x.analyst)));
  } catch (err) { showError($("admin-error"), err); }
}
function lossBody(eps, delta) {
  const body = { epsilon: $(eps).value.trim() };
  if ($(delta).value.trim()) body.delta = $(delta).value.trim();
  return body;
}
$("dataset-budget-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    await api("PUT", `/v1/admin/datasets/${encodeURIComponent($("db-dataset").value)}/budget`, lossBody("db-epsilon", "db-delta"));
    await loadAdmin();
  } catch (err) { showError($("admin-error"), err); }
});
$("analyst-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    const r = await api("POST", "/v1/admin/analysts", { name: $("new-analyst").value });
    $("new-token").textContent = `Token of ${r.analyst} (shown once, copy it now): ${r.token}`;
    await loadAdmin();
  } catch (err) { showError($("admin-error"), err); }
});
$("grant-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  try {
    await api("PUT", `/v1/admin/analysts/${encodeURIComponent($("grant-analyst").value)}/budgets/${encodeURIComponent($("grant-dataset").value)}`,
      lossBody("grant-epsilon", "grant-delta"));
    await loadAdmin();
  } catch (err) { showError($("admin-error"), err); }
});
$("access-form").addEventListener("submit", async (e) => {  // rotate or revoke a token
  e.preventDefault();
  const name = $("access-analyst").value;
  const path = `/v1/admin/analysts/${encodeURIComponent(name)}`;
  try {
    if (e.submitter && e.submitter.value === "revoke") {
      if (!confirm(`Revoke the token of ${name}? It stops working at once; what it spent stays spent.`)) return;
      await api("POST", `${path}/revoke`);
      if (name === state.me.analyst) { $("signout").click(); return; }  // revoked oneself
      $("new-token").textContent = `${name} is revoked: no token works for it until it gets a new one.`;
    } else {
      if (!confirm(`Give ${name} a new token? Its current token stops working at once (a revoked analyst works again).`)) return;
      const r = await api("POST", `${path}/rotate`);
      if (r.analyst === state.me.analyst) {  // one's own: keep the session with the new token
        state.token = r.token;
        sessionStorage.setItem("statcurator-token", r.token);
      }
      $("new-token").textContent = `New token of ${r.analyst} (shown once, copy it now; the old one no longer works): ${r.token}`;
    }
    await loadAdmin();
  } catch (err) { showError($("admin-error"), err); }
});
$("anon-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  showError($("admin-error"));
  const body = { k: Number($("anon-k").value), suppression: $("anon-supp").value.trim() || 0, algorithm: $("anon-algorithm").value };
  const qi = $("anon-qi").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (qi.length) body.qi = qi;
  if ($("anon-sensitive").value.trim()) body.sensitive = $("anon-sensitive").value.trim();
  if ($("anon-l").value.trim()) body.l = Number($("anon-l").value);
  $("anon-report").replaceChildren(el("caption", "anonymizing…"));
  try {
    const r = await api("POST", `/v1/admin/datasets/${encodeURIComponent($("anon-dataset").value)}/anonymize`, body);
    const rows = [["criteria", r.criteria.join(", ")], ["algorithm", r.algorithm],
      ["levels", Object.entries(r.levels || {}).map(([k, v]) => `${k}→${v}`).join(", ")],
      ["records", r.records], ["suppressed", r.suppressed], ["equivalence classes", r.classes],
      ["smallest class", r.min_class_size],
      ...Object.entries(r.metrics || {}).map(([k, v]) => [k, typeof v === "number" ? fmt(v) : JSON.stringify(v)]),
      ["verified independently", Object.entries(r.verified).map(([k, v]) => `${k}: ${v ? "yes" : "NO"}`).join("; ")]];
    table($("anon-report"), ["", ""], rows);
  } catch (err) { $("anon-report").replaceChildren(); showError($("admin-error"), err); }
});

if (state.token) signIn(state.token);
