// The dashboard page: fetches /api/view every second and redraws (no build step).
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
const fmt = (n, d = 0) => (n === null || n === undefined ? "" : Number(n).toLocaleString("en", { maximumFractionDigits: d, minimumFractionDigits: d }));
const ago = (s) => (s === null || s === undefined ? "?" : s < 120 ? `${s.toFixed(1)} s ago` : s < 7200 ? `${(s / 60).toFixed(0)} min ago` : `${(s / 3600).toFixed(1)} h ago`);
const clock = (t) => (t === null || t === undefined ? "" : new Date(t * 1000).toLocaleTimeString("en-GB"));
const size = (b) => (b === null || b === undefined ? "" : b < 1024 ? `${b} B` : b < 1 << 20 ? `${(b / 1024).toFixed(1)} KiB` : `${(b / (1 << 20)).toFixed(1)} MiB`);

function table(id, head, rows) {
  const t = $(id);
  t.replaceChildren();
  const tr = el("tr");
  head.forEach((h) => tr.append(el("th", {}, h)));
  t.append(tr);
  for (const row of rows) {
    const r = el("tr");
    for (const cell of row) {
      const [text, cls] = Array.isArray(cell) ? cell : [cell, typeof cell === "number" ? "num" : ""];
      const attrs = cls ? { class: cls } : {};
      if (String(text).length > 40) attrs.title = String(text); // the whole of a cut-off cell
      r.append(el("td", attrs, String(text)));
    }
    t.append(r);
  }
  if (!rows.length) { const r = el("tr"); r.append(el("td", { colspan: head.length }, "none")); t.append(r); }
}

function drawGraph(v) {
  const g = v.graph, states = v.subtask_states, box = $("graph");
  const W = 190, GAP = 70, H = 70 + 18 * Math.max(1, ...g.stages.map((s) => s.operators.length + 1));
  const svg = el("svg:svg", { width: Math.max(300, g.stages.length * (W + GAP)), height: H + (g.edges.some((e) => e.loop) ? 70 : 20), role: "img", "aria-label": "job graph" });
  const defs = el("svg:defs"), m = el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  m.append(el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#555" })); defs.append(m); svg.append(defs);
  const x = (i) => 10 + i * (W + GAP);
  g.stages.forEach((s) => {
    const grp = el("svg:g", { class: "stage-box", "data-stage": s.index });
    grp.append(el("svg:rect", { x: x(s.index), y: 10, width: W, height: H, rx: 6, class: "stage" }));
    grp.append(el("svg:text", { x: x(s.index) + 8, y: 28, "font-weight": "bold" }, `stage ${s.index} × ${s.parallelism}`));
    const lines = [s.source ? `source: ${s.source}` : "", ...s.operators].filter(Boolean);
    lines.forEach((l, k) => grp.append(el("svg:text", { x: x(s.index) + 8, y: 46 + 16 * k }, l.length > 28 ? l.slice(0, 27) + "…" : l)));
    for (let i = 0; i < s.parallelism && i < 12; i++) {
      const name = `s${s.index}-${i}`, st = states[name] || "running";
      const c = el("svg:circle", { cx: x(s.index) + 14 + i * 16, cy: H - 2, r: 6, class: st.replaceAll(" ", "-") });
      c.append(el("svg:title", {}, `${name}: ${st}`));
      grp.append(c);
    }
    svg.append(grp);
  });
  g.edges.forEach((e) => {
    if (e.loop) {
      const x1 = x(e.source) + W / 2, x2 = x(e.target) + W / 2 + 20, y = H + 10;
      svg.append(el("svg:path", { class: "loop", d: `M${x1},${y} C${x1},${y + 45} ${x2},${y + 45} ${x2},${y + 2}` }));
      svg.append(el("svg:text", { x: (x1 + x2) / 2 - 20, y: y + 50 }, `loop ${e.kind}`));
    } else {
      const y = 10 + H / 2 + e.input * 14;
      svg.append(el("svg:line", { class: "edge", x1: x(e.source) + W, y1: y, x2: x(e.target), y2: y }));
      if (e.kind) svg.append(el("svg:text", { x: x(e.source) + W + 4, y: y - 4, "font-size": 10 }, e.kind));
    }
  });
  box.replaceChildren(svg);
  $("sinks").textContent = g.known_from === "none" ? "graph not known yet (no subtask acked)" :
    (g.sinks.length ? `sinks: ${g.sinks.join(", ")}` : "") + (g.known_from === "subtasks" ? " (stages from the subtasks; channels unknown until a checkpoint completes)" : "");
}

function drawPlot(rows) {
  const W = 720, H = 140, done = rows.filter((r) => r.duration_s !== null || r.status !== "completed");
  const max = Math.max(0.001, ...rows.map((r) => r.duration_s || 0));
  const svg = el("svg:svg", { width: W, height: H + 20, role: "img", "aria-label": "checkpoint durations" });
  const bw = Math.max(2, Math.min(20, (W - 60) / Math.max(1, rows.length)));
  svg.append(el("svg:text", { x: 0, y: 12 }, `${max.toFixed(2)} s`));
  svg.append(el("svg:line", { x1: 50, y1: H, x2: W, y2: H, stroke: "#999" }));
  rows.forEach((r, i) => {
    const h = r.duration_s ? (r.duration_s / max) * (H - 10) : 4;
    const b = el("svg:rect", { x: 52 + i * bw, y: H - h, width: bw - 1, height: h, class: `bar-${r.status.replace(" ", "-")}` });
    b.append(el("svg:title", {}, `checkpoint ${r.checkpoint}: ${r.status} ${r.duration_s ? r.duration_s.toFixed(3) + " s" : ""}`));
    svg.append(b);
  });
  svg.append(el("svg:text", { x: 52, y: H + 16 }, `end-to-end duration of the last ${rows.length} checkpoints (green completed, red aborted)`));
  $("plot").replaceChildren(svg);
  return done;
}

// A pending subtask as its worker's latest heartbeat reports it.
function pendingText(p) {
  if (!p.inputs) return "no report yet";
  const rec = Object.keys(p.recording).length, arr = Object.keys(p.arrived).length;
  if (rec) return `recording ${rec} of ${p.inputs} channels (from the offsets shown)`;
  return `aligning: barrier arrived on ${arr} of ${p.inputs} channels`;
}

function render(v) {
  const s = v.status;
  $("job").textContent = s.job;
  const state = { running: ["running", "good"], stopped: ["stopped", "warn"], silent: ["not running (coordinator silent)", "bad"], unknown: ["state unknown", "warn"] }[s.state];
  const h = $("headline");
  h.replaceChildren(el("span", { class: state[1], id: "state" }, state[0]),
    ` · generation ${s.generation} · in ${fmt(s.records_in)} (${s.in_per_s === null ? "?" : fmt(s.in_per_s)}/s) · out ${fmt(s.records_out)} (${s.out_per_s === null ? "?" : fmt(s.out_per_s)}/s) · checkpoints completed ${s.completed}, aborted ${s.aborted} · recoveries ${s.recoveries}`);
  $("failure").hidden = !s.failure;
  $("failure").textContent = s.failure ? `failed: ${s.failure}` : "";
  drawGraph(v);
  table("workers", ["worker", "alive", "last heartbeat", "gen", "state", "in", "out", "in/s", "out/s"], s.workers.map((w) => [
    w.worker, w.alive ? ["yes", "good"] : ["no", "bad"], ago(w.age_s), w.generation,
    [w.restoring && "restoring", w.waiting && "waiting", w.storing && `storing: ${w.storing}`, w.stuck && `stuck: ${w.stuck}`].filter(Boolean).join(", ") || "running",
    w.records_in, w.records_out, fmt(w.in_per_s), fmt(w.out_per_s)]));
  const acks = Object.fromEntries(s.subtasks.map((t) => [t.subtask, t]));
  table("subtasks", ["subtask", "state", "latest snapshot", "acked", "size", "alignment ms", "sync ms", "channel state"], Object.entries(v.subtask_states).map(([name, st]) => {
    const t = acks[name];
    return [name, [st, st === "running" ? "good" : "warn"], t ? t.checkpoint : "", t ? ago(t.age_s) : "", t ? size(t.size) : "",
      t ? fmt(t.alignment_ms, 1) : "", t ? fmt(t.sync_ms, 1) : "",
      t ? (t.unaligned ? `unaligned: ${t.in_flight} in-flight records recorded` : "aligned") + (t.behind ? " · behind" : "") + (t.declined ? ` · declined: ${t.declined}` : "") : ""];
  }));
  const fl = $("in-flight");
  fl.replaceChildren();
  if (!v.in_flight.length) fl.append(el("p", {}, "none"));
  v.in_flight.forEach((f) => {
    fl.append(el("p", {}, `checkpoint ${f.checkpoint} (generation ${f.generation}), triggered ${ago(f.age_s)}`));
    const t = el("table", { id: `flight-${f.checkpoint}` }); fl.append(t);
    table(t.id, ["subtask", "part", "channel state", "channels cut at (topic[partition] → offset)"], f.parts.map((p) => [
      p.subtask, [p.state === "pending" ? "pending (aligning or recording)" : p.state, p.state === "acked" ? "good" : p.state === "declined" ? "bad" : "warn"],
      p.state === "acked" ? (p.unaligned ? `unaligned: ${p.in_flight} records recorded` : "aligned") : p.state === "declined" ? p.reason : pendingText(p),
      Object.entries(p.state === "acked" ? p.channels : Object.keys(p.recording).length ? p.recording : p.arrived).map(([c, o]) => `${c} → ${o}`).join(", ")]));
  });
  table("recorded", ["subtask", "checkpoint", "generation", "records recorded", "channels cut at (topic[partition] → offset)"], v.recorded.map((r) => [
    r.subtask, r.checkpoint, r.generation, r.in_flight, Object.entries(r.channels).map(([c, o]) => `${c} → ${o}`).join(", ")]));
  drawPlot(v.checkpoints);
  table("checkpoints", ["id", "status", "started by", "triggered", "duration s", "alignment ms", "size", "acks", "slowest subtask", "after s", "its alignment ms", "its sync ms", "its channel state"],
    [...v.checkpoints].reverse().map((r) => {
      const w = r.slowest;
      return [r.checkpoint, [r.status === "aborted" && r.reason ? `aborted: ${r.reason}` : r.status, r.status === "completed" ? "good" : r.status === "aborted" ? "bad" : "warn"],
        r.started_by || "coordinator", clock(r.triggered_at), fmt(r.duration_s, 3), fmt(r.alignment_ms, 1), size(r.size), r.acks,
        w ? w.subtask : "", w ? fmt(w.after_s, 3) : "", w ? fmt(w.alignment_ms, 1) : "", w ? fmt(w.sync_ms, 1) : "",
        w ? (w.unaligned ? `unaligned, ${w.in_flight} records` : "aligned") : ""];
    }));
  table("recoveries", ["time", "generation", "to checkpoint", "cause", "reason"], [...s.recent_recoveries].reverse().map((r) => [
    clock(r.time), r.generation, r.checkpoint === null ? "start" : r.checkpoint, [r.cause + (r.fresh ? " (fresh)" : ""), r.cause === "start" ? "" : "bad"], r.reason]));
}

async function refresh() {
  try {
    const r = await fetch("/api/view", { cache: "no-store" });
    if (r.ok) { render(await r.json()); document.body.dataset.loaded = "yes"; }
  } catch (e) {
    $("headline").textContent = `dashboard unreachable: ${e}`;
  }
  setTimeout(refresh, 1000);
}
refresh();
