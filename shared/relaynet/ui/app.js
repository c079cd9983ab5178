// Relaynet operator page (GET /v1/ui). Plain script, no framework, no build step.
//
// - The representative token lives in sessionStorage only (this tab); it is sent only as the
//   Authorization header of POST <api>/tools/control_* calls, never in a URL, never in the DOM.
// - Every section loads with its own call and shows that call's refusal (403/404) itself, so a
//   missing grant degrades one section instead of blanking the page.
// - Data is refreshed when the hub says something happened: the page listens to GET <api>/events
//   (the representative's stream, docs/protocol.md 10.6; fetch, since EventSource cannot send
//   the Authorization header) and refreshes shortly after each `activity` event of the shown
//   network, with a slow STREAM_REFRESH_MS refresh beside it for what makes no event (presence,
//   lapsing claims). Without the stream (the AWS stack has none yet, or it dropped) it polls every
//   REFRESH_MS and tries the stream again every STREAM_RETRY_MS. Hidden tabs pause both.
// - Actions are the control tools' own: stop/restart are the API's two-step confirmation
//   (confirmationId), release/cancel/wake ask in a dialog first. All text goes in with
//   textContent / createElement: nothing from the hub is parsed as HTML.
"use strict";

(function () {
  const REFRESH_MS = 3000;
  const STREAM_REFRESH_MS = 30000;
  const STREAM_RETRY_MS = 10000;
  const SOON_MS = 250; // events come in bursts (a task move is several writes): one refresh for a burst
  const TOKEN_KEY = "relaynet.token";
  const NET_KEY = "relaynet.network";
  const LEVELS = ["observe", "communicate", "delegate", "operate"];
  const ACTIVE_STATES = ["pending", "offered", "accepted", "working", "blocked"];
  const TERMINAL = ["completed", "failed", "cancelled"];
  const HISTORY_PAGE = 12;
  // the API lives beside the page: <base>/ui -> <base>/tools/<tool> (works under any stage prefix)
  const API = location.pathname.replace(/\/ui\/?$/, "/");

  const state = {
    token: null, me: null, networks: [], network: null, grant: null, skewMs: 0, timer: null, inFlight: false,
    stream: null, streamOpen: false, streamRetry: null, soonTimer: null, again: false,
    taskFilter: "active", historyCursors: [null], lastOk: null, failing: false,
    data: { status: null, agents: null, tasks: null, blocked: null, graph: null, history: null },
  };

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const SVG_NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value; else node.setAttribute(key, value);
    }
    for (const child of children.flat()) if (child) node.append(child);
    return node;
  }
  const pill = (value, extra) => el("span", { class: `pill p-${value}${extra ? " " + extra : ""}`, text: value });
  const shortId = (id) => (id ? id.slice(0, 5) + "…" + id.slice(-6) : "");

  // ---------------------------------------------------------------- time
  const serverNow = () => Date.now() + state.skewMs;
  function ago(iso) {
    if (!iso) return "";
    return duration(serverNow() - Date.parse(iso));
  }
  function duration(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }
  function countdown(iso) {
    const left = Math.max(0, Math.floor((Date.parse(iso) - serverNow()) / 1000));
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    const mmss = `${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}`;
    return { text: h ? `${h}:${mmss}` : mmss, left };
  }
  const clockTime = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

  // ---------------------------------------------------------------- the API
  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  async function call(tool, args) {
    const body = { ...(args || {}) };
    if (state.network && tool !== "control_whoami" && tool !== "control_list_networks") body.networkId = state.network;
    let resp;
    try {
      resp = await fetch(`${API}tools/${tool}`, {
        method: "POST", cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
        headers: { "Authorization": `Bearer ${state.token}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      throw new ApiError(0, "unreachable", "the hub did not answer");
    }
    const date = resp.headers.get("Date");
    if (date) { // the hub's clock, for countdowns; Date has 1 s resolution, so only a real skew counts
      const skew = Date.parse(date) + 500 - Date.now();
      if (Math.abs(skew - state.skewMs) > 1500) state.skewMs = skew;
    }
    let payload = null;
    try { payload = await resp.json(); } catch (err) { payload = null; }
    if (!resp.ok) {
      const error = (payload && payload.error) || {};
      throw new ApiError(resp.status, error.code || `http_${resp.status}`, error.message || resp.statusText);
    }
    return payload;
  }

  // ---------------------------------------------------------------- sections
  function section(id) { return $(id).querySelector(".body"); }

  function refusal(err) {
    if (err.status === 403) {
      return el("div", { class: "refused" }, el("b", { text: "Missing grant: this token may not see this." }),
        `${err.code}: ${err.message}`);
    }
    if (err.status === 404) {
      return el("div", { class: "refused" }, el("b", { text: "No such network for this token." }), `${err.code}: ${err.message}`);
    }
    return el("div", { class: "refused" }, el("b", { text: "Could not load this section." }), `${err.code}: ${err.message}`);
  }

  function fill(id, ...nodes) { section(id).replaceChildren(...nodes.filter((n) => n !== null && n !== undefined)); }

  const may = (level) => state.grant !== null && LEVELS.indexOf(state.grant) >= LEVELS.indexOf(level);
  function grantNote(level, what) {
    return may(level) ? null : el("p", { class: "note", text: `${what} the ${level} grant` +
      (state.grant ? ` (this token has ${state.grant}).` : ".") });
  }

  function renderSummary() {
    const st = state.data.status;
    const box = $("summary");
    if (!st || st instanceof ApiError) { box.replaceChildren(); return; }
    const inst = st.instances, tasks = st.tasks;
    const activeTasks = ACTIVE_STATES.reduce((n, s) => n + (tasks[s] || 0), 0);
    const stat = (n, label, parts, id) => el("div", { class: "stat", id },
      el("div", { class: "n", text: String(n) }), el("div", { class: "l", text: label }),
      parts && parts.length ? el("div", { class: "parts" }, parts) : null);
    const partPills = (obj, keys) => keys.filter((k) => obj[k]).map((k) => el("span", { class: `pill plain p-${k}`, text: `${obj[k]} ${k}` }));
    box.replaceChildren(
      stat(st.agents, "agents", null, "stat-agents"),
      stat(inst.available + inst.working, "instances online", partPills(inst, ["available", "working", "offline", "stopped"]), "stat-instances"),
      stat(activeTasks, "open tasks", partPills(tasks, ACTIVE_STATES), "stat-tasks"),
      stat(st.activeClaims, "live claims", null, "stat-claims"),
      stat(st.openChannels, "open channels", null, "stat-channels"),
    );
  }

  function instanceLabel(instanceId) {
    const agents = state.data.agents;
    if (agents && !(agents instanceof ApiError)) {
      for (const a of agents.agents) if (a.instances.some((i) => i.id === instanceId)) return `${a.name} ${shortId(instanceId)}`;
    }
    return shortId(instanceId);
  }

  function activeTaskOf(instanceId) {
    const tasks = state.data.tasks;
    if (!tasks || tasks instanceof ApiError) return null;
    return tasks.tasks.find((t) => t.assignee === instanceId && ["accepted", "working", "blocked", "offered"].includes(t.state)) || null;
  }

  // A supervised instance's run state (docs/protocol.md 10.8): "supervised: running 1 of 2, last run exit 0".
  function supervisorText(sup) {
    if (sup.state === "lost") return `supervisor lost (last report ${ago(sup.updatedAt)} ago)`;
    const runs = sup.state === "running" ? ` ${sup.activeRuns} of ${sup.maxRuns}` : "";
    const last = sup.lastRun ? `, last run ${sup.lastRun.exit === null ? "ended" : "exit " + sup.lastRun.exit}${sup.lastRun.timedOut ? " (timed out)" : ""}` : "";
    return `supervised: ${sup.state}${runs}${last}`;
  }

  function renderAgents() {
    const data = state.data.agents;
    if (data instanceof ApiError) return fill("agents", refusal(data));
    if (!data) return;
    if (!data.agents.length) return fill("agents", el("p", { class: "empty", text: "No agent definitions in this network." }));
    const operate = may("operate");
    const list = data.agents.map((agent) => {
      const insts = agent.instances.map((inst) => {
        const task = activeTaskOf(inst.id);
        const doing = task
          ? el("span", { class: "doing" }, `${task.state}: `, el("b", { text: task.title }))
          : el("span", { class: "doing", text: inst.availability === "stopped" ? "stopped" : "no active task" });
        const seen = el("span", { class: "sub muted", title: inst.lastSeenAt, text: `seen ${ago(inst.lastSeenAt)} ago` });
        const supervised = inst.supervisor ? el("span", { class: "sub supervisor", "data-supervisor": inst.supervisor.state,
          title: `supervisor reported ${inst.supervisor.updatedAt}`, text: supervisorText(inst.supervisor) }) : null;
        const actions = operate ? el("span", { class: "side" },
          inst.status !== "stopped" ? el("button", { type: "button", class: "act", "data-action": "wake", text: "Wake", "aria-label": `Wake ${agent.name} ${inst.id}`,
            onclick: () => wake({ toInstance: inst.id }, `${agent.name} ${shortId(inst.id)}`) }) : null,
          inst.status !== "stopped" ? el("button", { type: "button", class: "act warn", "data-action": "stop", text: "Stop", "aria-label": `Stop ${agent.name} ${inst.id}`,
            onclick: () => twoStep("control_stop_agent", inst, agent.name) }) : null,
          el("button", { type: "button", class: "act", "data-action": "restart", text: "Restart", "aria-label": `Restart ${agent.name} ${inst.id}`,
            onclick: () => twoStep("control_restart_agent", inst, agent.name) })) : null;
        return el("li", { class: "inst", "data-instance": inst.id },
          pill(inst.availability === "available" ? "available" : inst.availability),
          el("span", { class: "id", title: inst.id, text: shortId(inst.id) }), doing, seen, supervised, actions);
      });
      return el("div", { class: "agent", "data-agent": agent.name },
        el("div", { class: "agent-head" },
          el("span", { class: "name", text: agent.name }),
          el("span", { class: "desc", text: agent.description || "" }),
          el("span", { class: "side" },
            ...(agent.groups || []).map((g) => el("span", { class: "pill plain", text: g })),
            operate ? el("button", { type: "button", class: "act", "data-action": "wake-agent", text: "Wake",
              onclick: () => wake({ toAgent: agent.name }, agent.name) }) : null)),
        insts.length ? el("ul", { class: "insts" }, insts) : el("p", { class: "empty", text: "No instances: tasks for it wait as pending." }));
    });
    fill("agents", ...list, grantNote("operate", "Wake, stop and restart need"));
  }

  function renderFilters() {
    const tasks = state.data.tasks;
    $("task-filters").hidden = !tasks || tasks instanceof ApiError;
    const counts = {};
    if (tasks && !(tasks instanceof ApiError)) for (const t of tasks.tasks) counts[t.state] = (counts[t.state] || 0) + 1;
    const activeN = ACTIVE_STATES.reduce((n, s) => n + (counts[s] || 0), 0);
    const chip = (key, label) => el("button", { type: "button", class: "chip", "aria-pressed": String(state.taskFilter === key),
      "data-filter": key, text: label, onclick: () => { state.taskFilter = key; renderTasks(); } });
    $("task-filters").replaceChildren(chip("active", `open ${activeN}`),
      ...["pending", "offered", "working", "blocked", "completed", "failed", "cancelled"].filter((s) => counts[s])
        .map((s) => chip(s, `${s} ${counts[s]}`)), chip("all", "all"));
  }

  function renderTasks() {
    renderFilters();
    const data = state.data.tasks;
    if (data instanceof ApiError) return fill("tasks", refusal(data));
    if (!data) return;
    const blocked = state.data.blocked && !(state.data.blocked instanceof ApiError) ? state.data.blocked : { tasks: [] };
    const why = new Map(blocked.tasks.map((t) => [t.id, t]));
    const shown = data.tasks.filter((t) => state.taskFilter === "all" ? true
      : state.taskFilter === "active" ? ACTIVE_STATES.includes(t.state) : t.state === state.taskFilter);
    if (!shown.length) {
      return fill("tasks", el("p", { class: "empty", text: state.taskFilter === "active" ? "No open tasks." : "No tasks in this state." }));
    }
    const canCancel = may("delegate");
    const rows = shown.map((t) => {
      const stuck = why.get(t.id);
      const target = t.target ? (t.target.agent || t.target.group || (t.target.instanceId && instanceLabel(t.target.instanceId)) || t.target.resource) : "";
      const assigned = t.assignee && t.assignee !== (t.target && t.target.instanceId) ? ` · ${t.state === "offered" ? "offered to" : "held by"} ${instanceLabel(t.assignee)}` : "";
      const creator = t.creator ? (t.creator.agent || (t.creator.representative && `rep ${t.creator.representative}`) || "hub") : "";
      const reason = stuck ? (stuck.why === "blocked" ? `blocked: ${stuck.reason || "no reason given"}`
        : "waiting: no live instance is eligible") : null;
      return el("li", { class: "row", "data-task": t.id, "data-state": t.state },
        pill(t.state),
        el("div", { class: "main" }, el("div", { class: "title", text: t.title }),
          el("div", { class: "sub", text: `${creator} → ${target}${assigned}` }),
          reason ? el("div", { class: "why", text: reason }) : null),
        el("div", { class: "side" },
          el("span", { class: "sub", title: t.createdAt, text: `${ago(t.createdAt)} old` }),
          canCancel && !TERMINAL.includes(t.state) ? el("button", { type: "button", class: "act warn", "data-action": "cancel",
            text: "Cancel", "aria-label": `Cancel ${t.title}`, onclick: () => cancelTask(t) }) : null));
    });
    fill("tasks", el("ul", { class: "rows" }, rows), data.nextCursor ? el("p", { class: "note", text: "Showing the newest 100 tasks." }) : null,
      grantNote("delegate", "Cancelling tasks needs"));
  }

  function renderClaims() {
    const st = state.data.status;
    if (st instanceof ApiError) return fill("claims", refusal(st));
    if (!st) return;
    if (!st.claims.length) return fill("claims", el("p", { class: "empty", text: "No live claims." }));
    const operate = may("operate");
    const agentOf = new Map();
    const agents = state.data.agents;
    if (agents && !(agents instanceof ApiError)) for (const a of agents.agents) for (const i of a.instances) agentOf.set(i.id, a.name);
    const rows = st.claims.map((c) => {
      const holder = c.holder || {};
      const who = holder.agent || agentOf.get(holder.instanceId) || "";
      const cd = countdown(c.expiresAt);
      return el("li", { class: "row", "data-claim": c.claimId },
        el("div", { class: "main" }, el("div", { class: "title mono", text: c.scope }),
          el("div", { class: "sub", text: `${who} ${shortId(holder.instanceId)}${c.taskId ? " · task " + shortId(c.taskId) : ""} · ${c.scopeType}` })),
        el("div", { class: "side" },
          el("span", { class: `countdown${cd.left < 60 ? " soon" : ""}`, "data-expires": c.expiresAt, title: `expires ${c.expiresAt}`, text: cd.text }),
          operate ? el("button", { type: "button", class: "act warn", "data-action": "release", text: "Release", "aria-label": `Release ${c.scope}`,
            onclick: () => releaseClaim(c, who) }) : null));
    });
    fill("claims", el("ul", { class: "rows" }, rows), grantNote("operate", "Releasing claims needs"));
  }

  function tickCountdowns() {
    for (const node of document.querySelectorAll(".countdown[data-expires]")) {
      const cd = countdown(node.getAttribute("data-expires"));
      node.textContent = cd.text;
      node.classList.toggle("soon", cd.left < 60);
    }
  }

  function renderChannels() {
    const st = state.data.status;
    if (st instanceof ApiError) return fill("channels", refusal(st));
    if (!st) return;
    if (!st.channels.length) return fill("channels", el("p", { class: "empty", text: "No open channels." }));
    fill("channels", el("ul", { class: "rows" }, st.channels.map((ch) => el("li", { class: "row", "data-channel": ch.channel_id },
      el("span", { class: "pill plain", text: ch.type }),
      el("div", { class: "main" }, el("div", { class: "title", text: ch.participants.join(" · ") }),
        el("div", { class: "sub", text: `${ch.intent ? ch.intent + " · " : ""}expires in ${duration(Date.parse(ch.expires_at) - serverNow())}` })),
      el("div", { class: "side" }, el("span", { class: "sub", text: ch.next_speaker ? "turn: " : "" }),
        el("b", { text: ch.next_speaker || "anyone may speak" }))))));
  }

  function renderHistory() {
    const data = state.data.history;
    if (data instanceof ApiError) return fill("history", refusal(data));
    if (!data) return;
    $("history-older").disabled = !data.nextCursor;
    $("history-newest").disabled = state.historyCursors.length <= 1;
    $("history-page").textContent = state.historyCursors.length > 1 ? `page ${state.historyCursors.length}, older events` : "newest first";
    if (!data.events.length) return fill("history", el("p", { class: "empty", text: "Nothing has happened yet." }));
    fill("history", el("ul", { class: "events" }, data.events.map((e) => el("li", { class: "event", "data-event": e.id },
      el("span", { class: "at", title: e.at, text: clockTime(e.at) }),
      el("span", { class: "kind", text: e.kind }),
      el("span", { class: "summary-text", text: e.summary })))));
  }

  // ---------------------------------------------------------------- graph
  const EDGE_COLOURS = { serves: "#9aa7b8", member: "#b7c0cc", responsible: "#13804b", delegated: "#1f6feb",
    claims: "#c4261d", asked: "#6e40c9" };
  const NODE_STYLE = {
    agent: ["#e7f0ff", "#1f6feb"], instance: ["#f7f9fb", "#9aa7b8"], group: ["#f0eafd", "#6e40c9"],
    resource: ["#e3f5ea", "#13804b"], scope: ["#fde8e6", "#c4261d"], representative: ["#fff3d6", "#9a6200"],
  };
  const COLUMN = { instance: 0, agent: 1, representative: 1, group: 2, resource: 3, scope: 3 };

  function renderGraph() {
    const data = state.data.graph;
    if (data instanceof ApiError) return fill("graph", refusal(data));
    if (!data) return;
    const nodes = new Map(data.nodes.map((n) => [n.id, { ...n }]));
    const resolve = (end) => {
      if (nodes.has(end)) return end;
      for (const prefix of ["agent:", "group:"]) if (nodes.has(prefix + end)) return prefix + end;
      const kind = end.startsWith("scope:") ? "scope" : "agent";
      nodes.set(end, { id: end, kind, label: end.includes(":") ? end.split(":").slice(1).join(":") : end });
      return end;
    };
    const edges = data.edges.map((e) => ({ ...e, from: resolve(e.from), to: resolve(e.to) }));
    if (!nodes.size) return fill("graph", el("p", { class: "empty", text: "Nothing to draw yet." }));
    const cols = [[], [], [], []];
    for (const n of nodes.values()) cols[COLUMN[n.kind] ?? 1].push(n);
    // instances sit next to the agent they serve
    const agentOrder = new Map(cols[1].map((n, i) => [n.id, i]));
    const servesOf = new Map(edges.filter((e) => e.kind === "serves").map((e) => [e.from, e.to]));
    cols[0].sort((a, b) => (agentOrder.get(servesOf.get(a.id)) ?? 99) - (agentOrder.get(servesOf.get(b.id)) ?? 99) || a.label.localeCompare(b.label));
    const W = 140, H = 30, GAP = 12, COLW = 190, PAD = 12, TOP = 26;
    const rows = Math.max(...cols.map((c) => c.length), 1);
    const height = TOP + rows * (H + GAP) + PAD;
    const width = PAD * 2 + COLW * 3 + W;
    const pos = new Map();
    cols.forEach((col, ci) => {
      const offset = (rows - col.length) * (H + GAP) / 2;
      col.forEach((n, ri) => pos.set(n.id, { x: PAD + ci * COLW, y: TOP + offset + ri * (H + GAP) }));
    });
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Network graph" });
    ["instances", "agents", "groups", "resources and claims"].forEach((label, ci) =>
      root.append(svg("text", { x: PAD + ci * COLW, y: 14, class: "g-label", text: label.toUpperCase() })));
    const drawn = new Set();
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      if (!a || !b) continue;
      const key = `${e.from}|${e.to}|${e.kind}`;
      if (drawn.has(key)) continue;
      drawn.add(key);
      let d, lx, ly;
      if (a.x === b.x) { // same column: an arc out to the right
        const x = a.x + W, y1 = a.y + H / 2, y2 = b.y + H / 2, bulge = 40 + Math.abs(y2 - y1) / 4;
        d = `M${x},${y1} C${x + bulge},${y1} ${x + bulge},${y2} ${x},${y2}`;
        lx = x + bulge * 0.75; ly = (y1 + y2) / 2;
      } else {
        const [s, t] = a.x < b.x ? [a, b] : [b, a];
        const x1 = s.x + W, y1 = s.y + H / 2, x2 = t.x, y2 = t.y + H / 2, mid = (x1 + x2) / 2;
        d = `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
        lx = mid; ly = (y1 + y2) / 2 - 3;
      }
      const colour = EDGE_COLOURS[e.kind] || "#9aa7b8";
      const path = svg("path", { d, fill: "none", stroke: colour, "stroke-width": e.kind === "serves" || e.kind === "member" ? 1.2 : 1.8,
        "stroke-dasharray": e.kind === "member" ? "4 3" : "none", "data-kind": e.kind });
      path.append(svg("title", { text: `${e.kind}${e.label ? ": " + e.label : ""}` }));
      root.append(path);
      if ((e.kind === "delegated" || e.kind === "asked") && e.label && e.label !== "1") {
        root.append(svg("text", { x: lx, y: ly, class: "g-count", "text-anchor": "middle", fill: colour, text: `×${e.label}` }));
      }
    }
    for (const n of nodes.values()) {
      const p = pos.get(n.id);
      const [fillColour, stroke] = NODE_STYLE[n.kind] || NODE_STYLE.agent;
      const g = svg("g", { class: "g-node", "data-node": n.id });
      g.append(svg("title", { text: `${n.kind}: ${n.label}${n.availability ? " (" + n.availability + ")" : ""}` }));
      g.append(svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: n.kind === "instance" ? 15 : 6, fill: fillColour, stroke }));
      if (n.availability) {
        const dot = { available: "#13804b", working: "#1f6feb", offline: "#9aa7b8", stopped: "#c4261d" }[n.availability] || "#9aa7b8";
        g.append(svg("circle", { cx: p.x + 13, cy: p.y + H / 2, r: 4.5, fill: dot }));
      }
      const label = n.label.length > 19 ? n.label.slice(0, 18) + "…" : n.label;
      g.append(svg("text", { x: p.x + (n.availability ? 24 : 10), y: p.y + H / 2 + 4, text: label }));
      root.append(g);
    }
    const legend = el("div", { class: "legend" }, Object.entries(EDGE_COLOURS).map(([kind, colour]) => {
      const swatch = el("i");
      swatch.style.background = colour; // CSSOM, allowed by style-src 'self'
      return el("span", {}, swatch, kind);
    }));
    root.style.maxWidth = `${Math.round(width * 1.15)}px`; // CSSOM, allowed by style-src 'self'
    fill("graph", el("div", { class: "graph-wrap" }, root), legend);
  }

  // ---------------------------------------------------------------- refresh loop
  // One section's data. A refusal (403/404) replaces what the section showed; a hub that does not
  // answer (network error, 5xx, 429) keeps the last good data on screen and marks the page failing.
  async function load(key, tool, args) {
    try { state.data[key] = await call(tool, args); }
    catch (err) {
      if (err.status === 401) throw err;
      const transient = err.status === 0 || err.status === 429 || err.status >= 500;
      if (transient) state.failing = true;
      if (!transient || !state.data[key] || state.data[key] instanceof ApiError) state.data[key] = err;
    }
  }

  async function refresh() {
    if (state.inFlight) { state.again = true; return; } // an event during a refresh: one more after it
    if (!state.token) return;
    state.inFlight = true;
    state.failing = false;
    try {
      const cursor = state.historyCursors[state.historyCursors.length - 1];
      await Promise.all([
        load("status", "control_network_status"),
        load("agents", "control_list_agents"),
        load("tasks", "control_list_tasks", { limit: 100 }),
        load("blocked", "control_list_blocked"),
        load("graph", "control_get_graph"),
        load("history", "control_get_history", cursor ? { limit: HISTORY_PAGE, cursor } : { limit: HISTORY_PAGE }),
      ]);
      if (!state.failing) state.lastOk = new Date();
      renderAll();
    } catch (err) {
      if (err.status === 401) return signOut("The token is no longer valid (401): sign in again.");
      throw err;
    } finally {
      state.inFlight = false;
      showLive();
      if (state.again) { state.again = false; soon(); }
    }
  }

  // ---------------------------------------------------------------- the event stream
  function soon() {
    if (state.soonTimer) return;
    state.soonTimer = setTimeout(() => { state.soonTimer = null; refresh(); }, SOON_MS);
  }

  function setStreamOpen(open) {
    if (state.streamOpen === open) return;
    state.streamOpen = open;
    document.body.dataset.live = open ? "stream" : "poll";
    showLive();
    schedule(); // the refresh interval follows the stream
  }

  async function listen() {
    clearTimeout(state.streamRetry);
    state.streamRetry = null;
    if (state.stream || document.hidden || !state.token) return;
    const control = new AbortController();
    state.stream = control;
    let revoked = false;
    try {
      const resp = await fetch(`${API}events`, { headers: { Authorization: `Bearer ${state.token}` }, signal: control.signal, cache: "no-store" });
      if (resp.status === 401) { revoked = true; return; }
      if (!resp.ok || !resp.body) return;
      setStreamOpen(true);
      soon(); // what happened before the stream opened is in no event: load it now
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = {};
          for (const line of block.split("\n")) {
            if (!line || line.startsWith(":")) continue;
            const at = line.indexOf(": ");
            if (at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
          }
          if (fields.event === "revoked") revoked = true;
          if (fields.event === "activity" && fields.data) {
            try { if (JSON.parse(fields.data).networkId === state.network) soon(); } catch (_) { /* not ours */ }
          }
        }
      }
    } catch (_) {
      // aborted (hidden, signed out) or dropped: polling takes over until the next try
    } finally {
      if (state.stream === control) state.stream = null;
      setStreamOpen(false);
      if (revoked && state.token) signOut("The token is no longer valid (401): sign in again.");
      else if (state.token && !document.hidden) state.streamRetry = setTimeout(listen, STREAM_RETRY_MS);
    }
  }

  function stopListening() {
    clearTimeout(state.streamRetry);
    state.streamRetry = null;
    if (state.stream) { state.stream.abort(); state.stream = null; }
  }

  function renderAll() {
    renderSummary(); renderAgents(); renderTasks(); renderClaims(); renderChannels(); renderGraph(); renderHistory();
  }

  function showLive() {
    const live = $("live");
    live.classList.toggle("paused", document.hidden);
    live.classList.toggle("failing", state.failing && !document.hidden);
    if (document.hidden) live.textContent = "paused while hidden";
    else if (state.failing) live.textContent = "hub not answering, retrying";
    else live.textContent = state.lastOk ? `live${state.streamOpen ? "" : " (polling)"} · updated ${clockTime(state.lastOk)}` : "loading…";
  }

  function schedule() {
    clearTimeout(state.timer);
    state.timer = null;
    if (document.hidden || !state.token) return;
    state.timer = setTimeout(async () => {
      try { await refresh(); } finally { schedule(); }
    }, state.streamOpen ? STREAM_REFRESH_MS : REFRESH_MS);
  }

  document.addEventListener("visibilitychange", () => {
    showLive();
    if (document.hidden) { clearTimeout(state.timer); state.timer = null; stopListening(); }
    else if (state.token) { refresh().then(schedule); listen(); }
  });
  setInterval(tickCountdowns, 1000);

  // ---------------------------------------------------------------- dialogs and actions
  function toast(text, bad) {
    const node = $("toast");
    node.textContent = text;
    node.classList.toggle("bad", !!bad);
    node.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { node.hidden = true; }, bad ? 8000 : 4000);
  }

  // confirm({title, text: [nodes], ok, reason}) -> resolves to {reason} or null when cancelled.
  // onOk runs the action; an error keeps the dialog open and shows the API's refusal.
  function confirmDialog({ title, text, ok, reason, onOk }) {
    const dlg = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").replaceChildren(...text.map((t) => (t instanceof Node ? t : el("p", { text: t }))));
    $("confirm-reason").hidden = $("confirm-reason-label").hidden = !reason;
    $("confirm-reason").value = "";
    $("confirm-error").hidden = true;
    const okButton = $("confirm-ok");
    okButton.textContent = ok;
    okButton.disabled = false;
    return new Promise((resolve) => {
      const finish = (value) => {
        okButton.onclick = $("confirm-cancel").onclick = dlg.onclose = dlg.querySelector("form").onsubmit = null;
        if (dlg.open) dlg.close();
        resolve(value);
      };
      const go = async (event) => {
        if (event) event.preventDefault();
        okButton.disabled = true;
        try { finish(await onOk($("confirm-reason").value.trim() || null)); }
        catch (err) {
          okButton.disabled = false;
          $("confirm-error").textContent = `${err.code}: ${err.message}`;
          $("confirm-error").hidden = false;
          if (err.status === 401) { finish(null); signOut("The token is no longer valid (401): sign in again."); }
        }
      };
      okButton.onclick = go;
      dlg.querySelector("form").onsubmit = go;
      $("confirm-cancel").onclick = () => finish(null);
      dlg.onclose = () => finish(null);
      dlg.showModal();
      (reason ? $("confirm-reason") : $("confirm-cancel")).focus();
    });
  }

  async function releaseClaim(claim, who) {
    const done = await confirmDialog({
      title: "Release this claim?", ok: "Release",
      text: [el("p", {}, "Release ", el("code", { text: claim.scope }), ` held by ${who || "?"} (${shortId(claim.holder.instanceId)})?`),
        "Anyone may then claim the files; the holder is not asked first."],
      onOk: () => call("control_release_claim", { claimId: claim.claimId }),
    });
    if (done) { toast(`Claim on ${claim.scope} released (${done.reason || "released"}).`); refresh(); }
  }

  async function cancelTask(task) {
    const done = await confirmDialog({
      title: "Cancel this task?", ok: "Cancel task", reason: true,
      text: [el("p", {}, el("b", { text: task.title }), ` (${task.state})`), "Cancelling is final: its claims are released and nobody will work on it."],
      onOk: (reason) => call("control_cancel_task", reason ? { taskId: task.id, reason } : { taskId: task.id }),
    });
    if (done) { toast(`Task "${task.title}" cancelled.`); refresh(); }
  }

  async function wake(to, label) {
    const done = await confirmDialog({
      title: `Wake ${label}?`, ok: "Wake", reason: true,
      text: ["Puts a notice in its inbox telling it to check network_inbox and its tasks."],
      onOk: (reason) => call("control_wake_agent", reason ? { ...to, reason } : to),
    });
    if (done) { toast(`Woke ${label}.`); refresh(); }
  }

  async function twoStep(tool, inst, agentName) {
    const verb = tool === "control_stop_agent" ? "Stop" : "Restart";
    let first;
    try { first = await call(tool, { instanceId: inst.id }); }  // step one: the API's confirmation
    catch (err) { return toast(`${verb} refused: ${err.code}: ${err.message}`, true); }
    const label = `${agentName} ${shortId(inst.id)}`;
    const consequences = verb === "Stop"
      ? "Its token is revoked at once, its claims are released and its open tasks go back to pending."
      : "Its token is rotated: the old one stops working at once and a new one is shown here once.";
    const done = await confirmDialog({
      title: `${verb} ${label}?`, ok: verb,
      text: [consequences, el("p", { class: "muted", text: `Confirmation ${first.confirmationId.slice(0, 12)}… expires at ${clockTime(first.expiresAt)}.` })],
      onOk: () => call(tool, { instanceId: inst.id, confirmationId: first.confirmationId }),
    });
    if (!done) return;
    if (done.token) showSecret(done.token);
    else toast(`${label} stopped: ${done.releasedClaims} claim(s) released, ${done.requeuedTasks.length} task(s) back to pending.`);
    refresh();
  }

  function showSecret(token) {
    const dlg = $("secret");
    $("secret-value").textContent = token;
    // The close event is queued as a task after dlg.close() hides the dialog, so Done wipes the
    // token itself, before closing; onclose covers Escape.
    const clear = () => { $("secret-value").textContent = ""; dlg.onclose = null; };
    dlg.onclose = clear;
    $("secret-close").onclick = () => { clear(); dlg.close(); };
    $("secret-copy").onclick = async () => {
      try { await navigator.clipboard.writeText($("secret-value").textContent); toast("Copied."); }
      catch (err) { toast("Copy is not allowed here: select the token and copy it.", true); }
    };
    dlg.showModal();
  }

  // ---------------------------------------------------------------- sign in / out, networks
  function renderNetworks(networks) {
    const select = $("network");
    select.replaceChildren(...networks.map((n) => el("option", { value: n.networkId, text: `${n.name || n.networkId} · ${n.grant}` })));
    select.value = state.network || "";
    select.disabled = networks.length < 2;
    select.closest(".switcher").hidden = networks.length === 0;
  }

  function pickNetwork(networks) {
    const saved = sessionStorage.getItem(NET_KEY);
    const chosen = networks.find((n) => n.networkId === saved) || networks.find((n) => n.networkId === (state.me && state.me.activeNetwork)) || networks[0];
    state.network = chosen ? chosen.networkId : null;
    state.grant = chosen ? chosen.grant : null;
  }

  async function start() {
    $("signin").hidden = true;
    $("console").hidden = false;
    $("bar-main").hidden = $("signout").hidden = false;
    state.data = { status: null, agents: null, tasks: null, blocked: null, graph: null, history: null };
    state.me = null; state.grant = null; state.network = null;
    let networks = [];
    try {
      state.me = await call("control_whoami");
      networks = (await call("control_list_networks")).networks;
      $("who").replaceChildren("signed in as ", el("b", { text: state.me.representative.name }));
    } catch (err) {
      if (err.status === 401) return signOut("Unknown or revoked token (401).");
      // Not a representative token (403), or the hub failed: each section shows its own refusal.
      $("who").replaceChildren(el("b", { text: "not a representative token" }), ` (${err.code})`);
    }
    state.networks = networks;
    pickNetwork(networks);
    renderNetworks(networks);
    await refresh();
    schedule();
    listen();
  }

  function signOut(message) {
    clearTimeout(state.timer);
    state.timer = null;
    state.token = null;
    stopListening();
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(NET_KEY);
    $("console").hidden = true;
    $("bar-main").hidden = $("signout").hidden = true;
    $("signin").hidden = false;
    for (const id of ["agents", "claims", "tasks", "channels", "graph", "history"]) section(id).replaceChildren();
    $("summary").replaceChildren();
    $("signin-error").textContent = message || "";
    $("signin-error").hidden = !message;
    $("token").focus();
  }

  $("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("token");
    const token = input.value.trim();
    input.value = "";
    if (!token) return;
    state.token = token;
    $("signin-submit").disabled = true;
    try {
      await call("control_whoami");
    } catch (err) {
      if (err.status === 401 || err.status === 0) {
        state.token = null;
        $("signin-submit").disabled = false;
        $("signin-error").textContent = err.status === 401 ? "Unknown or revoked token (401)." : "The hub did not answer.";
        $("signin-error").hidden = false;
        return;
      }
    }
    $("signin-submit").disabled = false;
    sessionStorage.setItem(TOKEN_KEY, token);
    start();
  });

  $("signout").addEventListener("click", () => signOut());
  $("network").addEventListener("change", (event) => {
    state.network = event.target.value;
    const chosen = state.networks.find((n) => n.networkId === state.network);
    state.grant = chosen ? chosen.grant : null;
    sessionStorage.setItem(NET_KEY, state.network);
    state.historyCursors = [null];
    state.data = { status: null, agents: null, tasks: null, blocked: null, graph: null, history: null };
    refresh();
  });
  $("history-older").addEventListener("click", () => {
    const data = state.data.history;
    if (data && data.nextCursor) { state.historyCursors.push(data.nextCursor); refresh(); }
  });
  $("history-newest").addEventListener("click", () => { state.historyCursors = [null]; refresh(); });

  state.token = sessionStorage.getItem(TOKEN_KEY);
  if (state.token) start(); else signOut();
})();
