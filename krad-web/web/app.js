// krad's page: every view is the bus's own requests and streams, relayed over
// one WebSocket (see krad-web/src/relay.rs for the message format).
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat(Infinity)) {
    if (child != null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
};

// Replaces a node's children (arrays flattened, nulls left out).
const put = (node, ...children) =>
  node.replaceChildren(...children.flat(Infinity).filter((c) => c != null));

// --- the socket -----------------------------------------------------------
let socket;
let nextId = 1;
const pending = new Map();   // id → {resolve, reject}
const streams = new Map();   // id → {onLine, onEnd}

function connect() {
  socket = new WebSocket(`ws://${location.host}/ws`);
  socket.onopen = () => { setLink(true); startBoard(); loadEnvironments(); };
  socket.onclose = () => {
    setLink(false);
    for (const { reject } of pending.values()) reject(new Error("the page lost the app"));
    pending.clear();
    for (const s of streams.values()) s.onEnd();
    streams.clear();
    setTimeout(connect, 1000);
  };
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    const id = message.id;
    if (pending.has(id)) {
      const { resolve, reject } = pending.get(id);
      pending.delete(id);
      if ("error" in message) reject(new Error(message.error));
      else resolve(message.answer);
    } else if (streams.has(id)) {
      const stream = streams.get(id);
      if ("line" in message) stream.onLine(message.line);
      else if ("error" in message) stream.onError?.(message.error);
      else if (message.end) { streams.delete(id); stream.onEnd(); }
    }
  };
}
function setLink(up) {
  const link = $("#link");
  link.textContent = up ? "live" : "reconnecting…";
  link.classList.toggle("up", up);
}
function ask(body) {
  const id = nextId++;
  socket.send(JSON.stringify({ id, ...body }));
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
// One bus request: its answer, or an Error carrying the bus's error.
async function call(request) {
  const answer = await ask({ call: request });
  if (answer && typeof answer === "object" && answer.Error) {
    const error = new Error(answer.Error.message);
    error.code = answer.Error.code;
    error.detail = answer.Error.detail;
    error.retryable = answer.Error.retryable === true;
    throw error;
  }
  return answer;
}
function open(request, onLine, onEnd, onError) {
  const id = nextId++;
  streams.set(id, { onLine, onEnd, onError });
  socket.send(JSON.stringify({ id, open: request }));
  return {
    send: (line) => socket.readyState === 1 && socket.send(JSON.stringify({ id, send: line })),
    close: () => { streams.delete(id); socket.readyState === 1 && socket.send(JSON.stringify({ id, close: true })); },
  };
}

// --- the board ------------------------------------------------------------
const agents = new Map();
const NEEDS_YOU = { asking: 0, idle: 1, starting: 2, working: 3, queued: 4, exited: 5 };
let boardStream;
let notified = new Set();

function startBoard() {
  boardStream?.close();
  boardStream = open({ SubscribeAgents: {} }, (line) => {
    if (line.Snapshot) {
      if (line.Snapshot.fresh) agents.clear();
      for (const agent of line.Snapshot.agents) noteAgent(agent, false);
    } else if (line.Agent) {
      noteAgent(line.Agent, true);
    } else if (line.Removed) {
      agents.delete(line.Removed.terminal);
    } else if (line.Sampled) {
      // CPU, memory and cost sampled anew: kept with the records (the board
      // shows none of them, so nothing is drawn again).
      for (const s of line.Sampled.agents) {
        const agent = agents.get(s.terminal);
        if (agent) { agent.usage = s.usage ?? undefined; agent.tokens = s.tokens ?? undefined; }
      }
      return;
    } else {
      return;
    }
    renderBoard();
    loadAsks();
    const known = new Set(environments.map((e) => e.name));
    if ([...agents.values()].some((a) => !known.has(a.environment))) loadEnvironments();
  }, () => {});
}
function noteAgent(agent, live) {
  const before = agents.get(agent.terminal);
  agents.set(agent.terminal, agent);
  if (live && agent.state === "asking" && before?.state !== "asking") notifyAsking(agent);
}
function notifyAsking(agent) {
  const key = `${agent.terminal}:${agent.rev}`;
  if (notified.has(key)) return;
  notified.add(key);
  window.kradNotifications = (window.kradNotifications || 0) + 1;
  if (window.Notification && Notification.permission === "granted") {
    new Notification(`${label(agent)} is asking`, { body: agent.message || "it needs you" });
  }
}
const label = (a) => a.name ? `${a.name} (${a.terminal})` : `agent ${a.terminal}`;
function since(iso) {
  const secs = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (secs < 60) return `${secs}s`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m`;
  return `${Math.floor(secs / 3600)}h${Math.floor((secs % 3600) / 60)}m`;
}
function renderBoard() {
  const body = $("#agents");
  const rows = [...agents.values()].sort((a, b) =>
    (NEEDS_YOU[a.state] ?? 6) - (NEEDS_YOU[b.state] ?? 6) || (a.queue_place ?? 0) - (b.queue_place ?? 0) || a.terminal - b.terminal);
  put(body, ...rows.map((a) => el("tr", {
      class: a.state === "asking" ? "needs-you" : "", dataset: { terminal: a.terminal, state: a.state } },
    el("td", {}, a.terminal),
    el("td", { class: "name", title: a.name || a.profile }, a.name || a.profile),
    el("td", { class: `state state-${a.state}` }, a.state, a.exit_code != null ? ` (${a.exit_code})` : ""),
    el("td", {}, a.state_source),
    el("td", { title: a.state_since }, since(a.state_since)),
    el("td", { class: "message" }, a.queue_place ? `[queue #${a.queue_place}] ` : "", a.message || a.title || ""),
    el("td", {}, a.environment),
    el("td", {}, a.host || "here"),
    el("td", {},
      a.state !== "exited" && a.state !== "queued" ? el("button", { type: "button", class: "attach", onclick: () => attach(a.terminal) }, "terminal") : null,
      " ",
      // An exited agent reads nothing more: no send.
      a.state !== "exited" ? el("button", { type: "button", class: "send", onclick: () => { $("#send-form").target.value = a.terminal; location.hash = "#forms"; } }, "send") : null,
      " ",
      el("button", { type: "button", onclick: () => { $("#close-form").target.value = a.terminal; location.hash = "#forms"; } }, "close")),
  )));
  $("#no-agents").hidden = rows.length > 0;
  document.body.dataset.agents = String(rows.length);
  if (!window.kradFirstPaint && rows.length > 0) {
    window.kradFirstPaint = performance.now();
  }
}
setInterval(() => agents.size && renderBoard(), 5000);
$("#notify").addEventListener("click", () => window.Notification?.requestPermission());

// --- asks -----------------------------------------------------------------
let asksLoading = false;
async function loadAsks() {
  if (asksLoading) return;
  asksLoading = true;
  try {
    const answer = await call({ Asks: {} });
    renderAsks(answer.Asks || []);
  } catch (e) {
    put($("#ask-cards"), el("p", { class: "error" }, e.message));
  } finally {
    asksLoading = false;
  }
}
function renderAsks(asks) {
  // An agent may be asking with no open ask to answer here: a hook or a screen
  // said so (a question in its own dialog). Its card says where to answer.
  const withAsk = new Set(asks.map((a) => a.terminal));
  const inTerminal = [...agents.values()].filter((a) => a.state === "asking" && !withAsk.has(a.terminal));
  const count = asks.length + inTerminal.length;
  $("#ask-count").textContent = count ? `(${count})` : "";
  $("#no-asks").hidden = count > 0;
  put($("#ask-cards"), ...inTerminal.map((agent) => el("div", { class: "card asking", dataset: { terminal: agent.terminal } },
    el("strong", {}, agent.message || "it is asking"),
    el("div", { class: "quiet" }, `${label(agent)} · ${agent.environment} · asked in its terminal: answer it there`),
    el("div", { class: "options" },
      el("button", { type: "button", class: "primary attach", onclick: () => attach(agent.terminal) }, "terminal"),
      el("button", { type: "button", class: "send", onclick: () => { $("#send-form").target.value = agent.terminal; location.hash = "#forms"; } }, "send")),
  )), ...asks.map((a) => {
    const agent = agents.get(a.terminal);
    const text = el("textarea", { rows: 2, placeholder: "or answer in words" });
    const answer = async (value) => {
      try { await call({ Answer: { ask: a.ask, answer: value } }); loadAsks(); }
      catch (e) { card.append(el("p", { class: "error" }, e.message)); }
    };
    const card = el("div", { class: "card ask", dataset: { ask: a.ask, terminal: a.terminal } },
      el("strong", {}, a.title || a.kind),
      el("div", { class: "quiet" }, `${agent ? label(agent) : "agent " + a.terminal} · ${a.environment} · ${a.kind}`),
      a.tool ? el("pre", {}, `${a.tool.name}: ${JSON.stringify(a.tool.input ?? {}, null, 1)}`) : null,
      el("div", { class: "options" }, a.options.map((o) =>
        el("button", { type: "button", class: o.id.startsWith("allow") ? "primary" : "", dataset: { option: o.id },
          onclick: () => answer({ option: o.id }) }, o.label))),
      a.kind !== "permission" ? [text, el("button", { type: "button", onclick: () => answer({ text: text.value }) }, "answer")] : null,
    );
    return card;
  }));
}

// --- terminals ------------------------------------------------------------
const terminals = new Map();
window.kradTerminals = terminals; // for the browser test's measurements
const b64encode = (text) => {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
};
const b64decode = (data) => Uint8Array.from(atob(data), (c) => c.charCodeAt(0));

function attach(terminal) {
  if (terminals.has(terminal)) { terminals.get(terminal).term.focus(); return; }
  const screen = el("div", { class: "screen" });
  const box = el("div", { class: "term", dataset: { terminal } },
    el("div", { class: "bar" }, el("span", {}, agents.get(terminal) ? label(agents.get(terminal)) : `terminal ${terminal}`),
      el("button", { type: "button", onclick: () => detach(terminal) }, "×")),
    screen);
  $("#term-grid").append(box);
  location.hash = "#terminals";
  if (!window.Terminal) {
    screen.append(el("p", { class: "error" }, window.KRAD_MISSING_ASSETS || "xterm.js is missing"));
    return;
  }
  const term = new window.Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 5000 });
  const fit = window.FitAddon ? new window.FitAddon.FitAddon() : null;
  if (fit) term.loadAddon(fit);
  term.open(screen);
  const entry = { term, box, output: "" };
  terminals.set(terminal, entry);
  const stream = open({ Attach: { target: terminal } }, (line) => {
    const data = line.Screen?.data ?? line.Output?.data;
    if (data != null) {
      const bytes = b64decode(data);
      term.write(bytes);
      entry.output += new TextDecoder().decode(bytes);
      if (entry.output.length > 200000) entry.output = entry.output.slice(-100000);
      box.dataset.bytes = String(entry.output.length);
      if (line.Screen) { fit?.fit(); stream.send({ Resize: { cols: term.cols, rows: term.rows } }); }
    } else if (line.Exited) {
      term.write("\r\n\x1b[2m[the program exited]\x1b[0m\r\n");
    } else if (line.Error) {
      term.write(`\r\n\x1b[31m${line.Error.message}\x1b[0m\r\n`);
    }
  }, () => { box.dataset.ended = "true"; }, (error) => term.write(`\r\n\x1b[31m${error}\x1b[0m\r\n`));
  entry.stream = stream;
  term.onData((text) => stream.send({ Input: { data: b64encode(text) } }));
  term.onResize(({ cols, rows }) => stream.send({ Resize: { cols, rows } }));
  new ResizeObserver(() => fit?.fit()).observe(screen);
  term.focus();
}
function detach(terminal) {
  const entry = terminals.get(terminal);
  if (!entry) return;
  entry.stream?.close();
  entry.term.dispose();
  entry.box.remove();
  terminals.delete(terminal);
}

// --- environments, changes, reviews, variants -------------------------------
let environments = [];
let envLoading = false, envAgain = false, groupsShown = "";
async function loadEnvironments() {
  if (envLoading) { envAgain = true; return; }
  envLoading = true;
  try {
    const answer = await call("Environments");
    environments = answer.Environments || [];
  } catch (e) {
    put($("#env-list"), el("p", { class: "error" }, e.message));
    return;
  } finally {
    envLoading = false;
    if (envAgain) { envAgain = false; setTimeout(loadEnvironments, 200); }
  }
  put($("#env-list"), ...environments.map((env) =>
    el("button", { type: "button", class: "env", dataset: { env: env.name }, onclick: () => showEnvironment(env.name) },
      env.name, env.group ? ` · ${env.group}#${env.variant}` : "")));
  // The variants' panels are redrawn only when the groups change, so that an
  // open dry run stays.
  const shown = JSON.stringify(environments.filter((e) => e.group).map((e) => [e.name, e.group, e.variant, e.group_picked]));
  if (shown !== groupsShown) { groupsShown = shown; renderGroups(); }
}
setInterval(() => socket?.readyState === 1 && loadEnvironments(), 10000);

// Each variant's dry-run panel, kept across redraws: a dry run under way (or
// shown) is not lost when the groups are drawn again.
const pickPanels = new Map();
function renderGroups() {
  const groups = new Map();
  for (const env of environments) {
    if (env.group) (groups.get(env.group) || groups.set(env.group, []).get(env.group)).push(env);
  }
  put($("#groups"), ...[...groups].map(([group, envs]) => {
    const row = el("div", { class: "groups-row" });
    for (const env of envs.sort((a, b) => a.variant - b.variant)) {
      const files = el("div", { class: "quiet" }, "…");
      const key = `${group}/${env.variant}`;
      const panel = pickPanels.get(key) || el("div", { class: "confirm", hidden: "" });
      pickPanels.set(key, panel);
      row.append(el("div", { class: "variant", dataset: { group, variant: env.variant } },
        el("strong", {}, `variant ${env.variant}`), el("div", {}, env.name), files,
        el("button", { type: "button", onclick: () => showEnvironment(env.name) }, "diff"), " ",
        el("button", { type: "button", class: "primary pick", onclick: () => dryRun(group, env.variant, panel) }, "pick…"),
        panel));
      const load = (tries) => call({ Changes: { environment: env.name } }).then((a) => {
        const c = a.Changes;
        const added = c.files.reduce((n, f) => n + f.added, 0), removed = c.files.reduce((n, f) => n + f.removed, 0);
        put(files, `${c.files.length} files, +${added} −${removed}`, ...c.files.map((f) => el("div", {}, `${f.status[0]} ${f.path}`)));
      }).catch((e) => {
        // A worktree still being made answers `unavailable`: asked again shortly.
        if (e.retryable && tries > 0) return setTimeout(() => load(tries - 1), 1000);
        put(files, el("span", { class: "error" }, e.message));
      });
      load(30);
    }
    // A group picked already offers no pick: it says which it kept.
    const picked = envs.find((e) => e.group_picked != null)?.group_picked;
    if (picked != null) row.querySelectorAll("button.pick").forEach((b) => b.remove());
    const board = scoreBoards.get(group) || el("div", { class: "scores", dataset: { group } });
    scoreBoards.set(group, board);
    const best = bestPanels.get(group) || el("div", { class: "confirm", hidden: "" });
    bestPanels.set(group, best);
    loadScores(group, board);
    return el("div", {}, el("h3", {}, `group ${group}`, picked != null ? ` · picked variant ${picked}` : ""),
      el("button", { type: "button", class: "scores-refresh", onclick: () => loadScores(group, board) }, "scores"), " ",
      picked != null ? null : el("button", { type: "button", class: "primary pick-best", onclick: () => pickBest(group, best) }, "pick the best…"),
      board, best, row);
  }));
}

// Each group's scoreboard (Scores): the checks of [checks] in each variant,
// cost, time, diff and conflicts, and the ranking a pick by rule follows.
const scoreBoards = new Map();
const bestPanels = new Map();
function scoreTable(scores) {
  const cell = (text, cls) => el("td", cls ? { class: cls } : {}, text);
  const checks = (v) => (scores.checks || []).map((name) => {
    const c = (v.checks || []).find((c) => c.name === name);
    if (!c) return `${name} -`;
    return c.exit_code && c.exit_code !== 0 ? `${name} ${c.outcome}(${c.exit_code})` : `${name} ${c.outcome}`;
  }).join(", ") + (v.checked ? "" : " *");
  const conflicts = (v) => [
    (v.conflicts_with_base || []).length ? `base: ${v.conflicts_with_base.length} file(s)` : null,
    (v.conflicts_with || []).length ? `variants ${v.conflicts_with.join(" ")}` : null,
  ].filter(Boolean).join("; ") || "none";
  const cost = (v) => v.tokens && v.tokens.cost_usd != null ? `$${Number(v.tokens.cost_usd).toFixed(2)}` : "-";
  const tokens = (v) => v.tokens ? String(v.tokens.input + v.tokens.output + v.tokens.cache_write + v.tokens.cache_read) : "-";
  const time = (v) => v.time_ms != null ? `${(v.time_ms / 1000).toFixed(1)}s` : "-";
  const rows = [...scores.variants].sort((a, b) => (a.rank || 99) - (b.rank || 99)).map((v) =>
    el("tr", { dataset: { variant: v.variant }, class: v.gates_passed ? "passed" : "" },
      cell(String(v.rank || "-")), cell(String(v.variant)), cell(v.environment), cell(v.state || "-"),
      cell(checks(v), "checks"), cell(cost(v)), cell(tokens(v)), cell(time(v)),
      cell(`${v.files} files, +${v.added} −${v.removed}`), cell(conflicts(v))));
  return el("div", {},
    el("table", { class: "score-table" },
      el("tr", {}, ...["rank", "#", "environment", "state", "checks", "cost", "tokens", "time", "diff", "conflicts"].map((h) => el("th", {}, h))),
      ...rows),
    el("div", { class: "quiet" }, `ranking (gating checks passed, fewest conflicts with the base, least cost, shortest time): ${(scores.ranking || []).join(", ")}`),
    el("div", { class: scores.best ? "best" : "quiet" }, scores.best ? `best: variant ${scores.best}` : `no best: ${scores.why || ""}`));
}
async function loadScores(group, board) {
  try {
    const answer = await call({ Scores: { group } });
    put(board, scoreTable(answer.Scores));
  } catch (e) { put(board, el("p", { class: "error" }, e.message)); }
}
// A pick by rule: the ranking and the dry run first; the pick only once
// confirmed, of the variant shown.
async function pickBest(group, panel) {
  panel.hidden = false;
  put(panel, "ranking and dry run…");
  try {
    const answer = await call({ PickVariant: { group, best: true, dry_run: true } });
    const picked = answer.Picked;
    const run = picked.dry_run || {};
    const conflicts = run.conflicts || [];
    put(panel,
      el("div", { class: "best-dry-run" }, `Best: variant ${picked.variant}, into ${picked.into}: ${(run.files || []).length} files`,
        ...(run.files || []).map((f) => el("div", {}, `· ${f}`)),
        conflicts.length ? el("div", { class: "error" }, `conflicts: ${conflicts.join(", ")}`) : null),
      conflicts.length ? null : el("button", { type: "button", class: "danger confirm-best", onclick: async () => {
        try {
          const done = await call({ PickVariant: { group, variant: picked.variant } });
          const text = `picked variant ${picked.variant} of ${group} (the best): ${done.Picked.commit.slice(0, 10)} on ${done.Picked.into}`;
          put($("#pick-result"), el("div", { class: "picked" }, text));
          put(panel, text);
          loadEnvironments();
        } catch (e) { panel.append(el("p", { class: "error" }, e.message)); }
      } }, `Pick variant ${picked.variant}`),
      " ", el("button", { type: "button", onclick: () => { panel.hidden = true; } }, "cancel"));
  } catch (e) {
    const scores = e.detail && e.detail.scores;
    put(panel, el("p", { class: "error refused" }, e.message), scores ? scoreTable(scores) : null);
  }
}
async function dryRun(group, variant, panel) {
  panel.hidden = false;
  put(panel, "what would land…");
  try {
    const answer = await call({ PickVariant: { group, variant, dry_run: true } });
    const run = answer.Picked.dry_run || {};
    const conflicts = run.conflicts || [];
    put(panel, 
      el("div", { class: "dry-run" }, `Into ${answer.Picked.into}: ${(run.files || []).length} files`,
        ...(run.files || []).map((f) => el("div", {}, `· ${f}`)),
        conflicts.length ? el("div", { class: "error" }, `conflicts: ${conflicts.join(", ")}`) : null,
        el("div", { class: "quiet" }, "The other variants are archived under refs/krad/archive/ (nothing lost).")),
      conflicts.length ? null : el("button", { type: "button", class: "danger confirm-pick", onclick: async () => {
        try {
          const picked = await call({ PickVariant: { group, variant } });
          const done = `picked variant ${variant} of ${group}: ${picked.Picked.commit.slice(0, 10)} on ${picked.Picked.into}`;
          put($("#pick-result"), el("div", { class: "picked" }, done));
          put(panel, done);
          loadEnvironments();
        } catch (e) { panel.append(el("p", { class: "error" }, e.message)); }
      } }, `Pick variant ${variant}`),
      " ", el("button", { type: "button", onclick: () => { panel.hidden = true; } }, "cancel"));
  } catch (e) { put(panel, el("p", { class: "error" }, e.message)); }
}
$("#conflicts").addEventListener("click", async () => {
  const view = $("#conflict-view");
  try {
    const answer = await call({ Conflicts: {} });
    const pairs = answer.Conflicts.pairs || [];
    put(view, el("div", { class: "card" }, el("strong", {}, "Conflicts between environments"),
      pairs.length ? pairs.map((p) => el("div", { class: p.clean ? "" : "error" },
        `${p.a} ↔ ${p.b}: ${p.clean ? "clean" : p.files.join(", ")}`)) : el("div", { class: "quiet" }, "none")));
  } catch (e) { put(view, el("p", { class: "error" }, e.message)); }
});

const KEYWORDS = new Set(("fn let mut pub use mod struct enum impl trait match if else for while loop return " +
  "const static async await self Self true false None Some Ok Err function var class import export from def " +
  "in of new this null undefined type interface package go func").split(" "));
function highlight(code) {
  const out = [];
  const re = /(\/\/.*$|#.*$|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b|\b[A-Za-z_]\w*\b)/g;
  let last = 0;
  for (const m of code.matchAll(re)) {
    out.push(code.slice(last, m.index));
    const t = m[0];
    const cls = t.startsWith("//") || t.startsWith("#") ? "tok-com" : /^["']/.test(t) ? "tok-str"
      : /^\d/.test(t) ? "tok-num" : KEYWORDS.has(t) ? "tok-kw" : null;
    out.push(cls ? el("span", { class: cls }, t) : t);
    last = m.index + t.length;
  }
  out.push(code.slice(last));
  return out;
}
// A unified patch → files of hunks of lines, each with its numbers.
function parsePatch(patch) {
  const files = [];
  let file, oldNo = 0, newNo = 0;
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) {
      file = { path: line.split(" b/").pop(), hunks: [] };
      files.push(file);
    } else if (!file) {
      continue;
    } else if (line.startsWith("+++ ") && line !== "+++ /dev/null") {
      file.path = line.slice(4).replace(/^b\//, "");
    } else if (line.startsWith("@@")) {
      const m = /@@ -(\d+)(?:,\d+)? \+(\d+)/.exec(line);
      oldNo = m ? +m[1] : 0; newNo = m ? +m[2] : 0;
      file.hunks.push({ header: line, lines: [] });
    } else if (file.hunks.length && /^[ +\-]/.test(line) && !line.startsWith("--- ") ) {
      const hunk = file.hunks[file.hunks.length - 1];
      const kind = line[0] === "+" ? "add" : line[0] === "-" ? "del" : "ctx";
      hunk.lines.push({ kind, text: line.slice(1), old: kind === "add" ? null : oldNo, new: kind === "del" ? null : newNo });
      if (kind !== "add") oldNo++;
      if (kind !== "del") newNo++;
    }
  }
  return files;
}
// The text of a file's line now (new side), as the diff shows it.
function lineNow(files, path, line) {
  const file = files.find((f) => f.path === path);
  for (const hunk of file?.hunks || []) {
    const found = hunk.lines.find((l) => l.new === line);
    if (found) return found.text;
  }
  return undefined;
}
async function showEnvironment(name) {
  const view = $("#env-view");
  put(view, el("p", { class: "quiet" }, `changes of ${name}…`));
  let changes, reviews;
  try {
    [changes, reviews] = await Promise.all([call({ Changes: { environment: name, patch: true } }), ask({ reviews: name })]);
  } catch (e) { put(view, el("p", { class: "error" }, e.message)); return; }
  const c = changes.Changes;
  const env = environments.find((e) => e.name === name);
  // The environment's agent: a live one of the board's (its lead first).
  const live = [...agents.values()].filter((a) => a.environment === name && a.state !== "exited")
    .sort((a, b) => (b.lead - a.lead) || a.terminal - b.terminal);
  const target = live[0]?.terminal ?? env?.terminals?.[0];
  const comments = new Map(); // "path:line" → {path, line, code, textarea}
  const sendButton = el("button", { type: "button", class: "primary send-review", disabled: "" }, "send comments");
  const status = el("span", { class: "quiet review-status" });
  const refreshButton = () => {
    const n = [...comments.values()].filter((x) => x.textarea.value.trim()).length;
    sendButton.textContent = `send ${n} comment${n === 1 ? "" : "s"} to ${target != null ? "agent " + target : "no agent"}`;
    if (n && target != null) sendButton.removeAttribute("disabled"); else sendButton.setAttribute("disabled", "");
  };
  const parsed = parsePatch(c.patch || "");
  const files = parsed.map((f) => el("div", { class: "diff", dataset: { path: f.path } },
    el("div", { class: "file" }, f.path),
    f.hunks.map((h) => [el("div", { class: "hunk" }, h.header), h.lines.map((l) => {
      const number = l.new ?? l.old;
      const row = el("div", { class: `ln ${l.kind}`, dataset: { line: number } },
        el("span", { class: "no", title: "comment on this line" }, number),
        el("span", { class: "code" }, l.kind === "add" ? "+" : l.kind === "del" ? "-" : " ", highlight(l.text)));
      row.firstChild.addEventListener("click", () => {
        const key = `${f.path}:${l.kind}:${number}`;
        if (comments.has(key)) { comments.get(key).textarea.focus(); return; }
        const textarea = el("textarea", { rows: 2, placeholder: `comment on ${f.path}:${number}` });
        textarea.addEventListener("input", refreshButton);
        comments.set(key, { path: f.path, line: number, code: l.text, textarea });
        row.classList.add("picked");
        row.after(el("div", { class: "comment" }, textarea));
        textarea.focus();
        refreshButton();
      });
      return row;
    })]),
  ));
  sendButton.addEventListener("click", async () => {
    const list = [...comments.values()].filter((x) => x.textarea.value.trim())
      .map(({ path, line, code, textarea }) => ({ path, line, code, text: textarea.value }));
    sendButton.setAttribute("disabled", "");
    status.textContent = "sending when the agent is idle…";
    try {
      const answer = await ask({ review: { environment: name, target, head: c.head, comments: list } });
      if (answer.Error) throw new Error(answer.Error.message);
      status.textContent = `sent ${list.length} comment${list.length === 1 ? "" : "s"} as one message`;
      status.className = "review-status sent";
    } catch (e) { status.textContent = e.message; status.className = "review-status error"; refreshButton(); }
  });
  const earlier = (reviews.Reviews || []).map((r) => el("div", { class: "reviews" },
    el("div", {}, `asked ${new Date(r.sent_at * 1000).toLocaleString()} at ${r.head.slice(0, 10) || "?"}` +
      (r.head && r.head !== c.head ? ` — changed since (now ${c.head.slice(0, 10)})` : " — nothing changed since")),
    r.comments.map((x) => {
      const now = lineNow(parsed, x.path, x.line);
      const changed = now === undefined ? "not in the diff any more" : now !== x.code ? `now: ${now.trim()}` : "unchanged";
      return el("div", { class: "quiet earlier-comment", dataset: { changed: String(now !== x.code) } },
        `${x.path}:${x.line} — ${x.text}`, el("span", { class: now !== x.code ? "changed" : "" }, ` (${changed})`));
    })));
  put(view, 
    el("h3", {}, `${name}: ${c.files.length} files against ${c.base.slice(0, 10)}`, c.truncated ? " (cut)" : ""),
    earlier.length ? el("div", {}, el("strong", {}, "Earlier reviews"), earlier) : null,
    el("div", {}, sendButton, " ", status),
    files.length ? files : el("p", { class: "quiet" }, "no changes"));
}

// --- spawn, send, close -----------------------------------------------------
const result = (text, error) => { const r = $("#form-result"); r.textContent = text; r.className = error ? "result error" : "result"; };
$("#spawn-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const f = event.target;
  const spawn = {};
  for (const key of ["profile", "name", "environment", "prompt"]) if (f[key].value.trim()) spawn[key] = f[key].value.trim();
  if (f.command.value.trim()) spawn.command = f.command.value.trim().split(/\s+/);
  try { const a = await call({ Spawn: spawn }); result(`started ${label(a.Agent)} in ${a.Agent.environment}`); }
  catch (e) { result(e.message, true); }
});
$("#send-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const f = event.target;
  const send = { target: Number(f.target.value), text: f.text.value, enter: f.enter.checked };
  if (f.idle.checked) send.when = "idle";
  try { const a = await call({ Send: send }); result(`sent to ${a.Sent.terminal} (now ${a.Sent.state})`); }
  catch (e) { result(e.message, true); }
});
$("#close-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const f = event.target;
  const panel = $(".confirm", f);
  const target = f.target.value.trim(), environment = f.environment.value.trim();
  const request = target ? { target: Number(target) } : { environment };
  const what = target ? `agent ${target}: its program gets SIGHUP (SIGKILL after 5 s); its transcript stays on disk`
    : `environment ${environment}: its terminals, then its worktree and branch; the branch tip (uncommitted work committed first) is kept under refs/krad/archive/${environment}`;
  // The agents a close of the environment ends, as the board knows them.
  const running = target ? [] : [...agents.values()]
    .filter((a) => a.environment === environment && a.state !== "exited" && a.state !== "queued")
    .map((a) => (a.name ? `${a.terminal} (${a.name})` : `${a.terminal}`));
  const ends = running.length
    ? ` It ends ${running.length === 1 ? "1 running agent" : `${running.length} running agents`}: ${running.join(", ")}.`
    : "";
  const go = async (force) => {
    try {
      await call({ Close: force ? { ...request, force: true } : request });
      panel.hidden = true; result(`closed ${target ? "agent " + target : "environment " + environment}`);
    } catch (e) {
      if (e.code === "conflict" && !force) {
        put(panel, el("p", { class: "error" }, e.message),
          el("p", {}, "Force still archives it first: nothing is lost."),
          el("button", { type: "button", class: "danger", onclick: () => go(true) }, "close anyway"));
      } else { result(e.message, true); }
    }
  };
  panel.hidden = false;
  put(panel, el("p", {}, `Close ${what}.${ends}`),
    el("button", { type: "button", class: "danger", onclick: () => go(false) }, "close"), " ",
    el("button", { type: "button", onclick: () => { panel.hidden = true; } }, "cancel"));
});

connect();
