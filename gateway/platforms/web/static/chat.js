"use strict";
// Herald's web chat. The server renders every reply's markdown to safe HTML; this script shows messages, keeps
// the token (from the URL fragment, never sent to the server, or pasted), lists the owner's chats (from the
// server: any browser sees them all), searches them, uploads files and follows the open chat's event stream.
const TOKEN_KEY = "herald_token", CHAT_KEY = "herald_chat";
const userId = "owner";
const $ = id => document.getElementById(id);
const log = $("log"), errorBox = $("error"), noticeBox = $("notice"), typing = $("typing"), status = $("status");
const tokenForm = $("tokenform"), compose = $("compose"), sidebar = $("sidebar"), scrim = $("scrim");
const chatsEl = $("chats"), resultsEl = $("results"), searchBox = $("search"), titleEl = $("title");
const fileInput = $("file"), pendingEl = $("pending");

function tokenFrom(text) {
  text = (text || "").trim();
  const at = text.indexOf("#");
  if (at >= 0) text = new URLSearchParams(text.slice(at + 1)).get("token") || "";
  return text.trim();
}
if (location.hash.includes("token=")) {
  const t = tokenFrom(location.hash);
  if (t) localStorage.setItem(TOKEN_KEY, t);
  history.replaceState(null, "", location.pathname);
}
let token = localStorage.getItem(TOKEN_KEY);
const newId = () => "web-" + Math.random().toString(36).slice(2, 10) + Date.now().toString(36).slice(-4);
let chatId = localStorage.getItem(CHAT_KEY) || newId();
localStorage.setItem(CHAT_KEY, chatId);
let chats = [];  // [{id, title, last_activity}], newest first, as the server lists them
let nodes = new Map();
let typingTimer = null, noticeTimer = null, streamAbort = null, listTimer = null, searchTimer = null;
let highlight = [];  // the words of the search result that opened this chat
let files = [];  // chosen for the next message

class Unauthorised extends Error {}

function setStatus(text, cls) { status.textContent = text; status.className = cls || ""; }
function showNotice(text) {
  // Notices are answers to a press ("Approved once"): information, not errors.
  noticeBox.textContent = text; clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { noticeBox.textContent = ""; }, 8000);
}
function ago(ts) {
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 45) return "just now";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  if (s < 86400 * 7) return Math.round(s / 86400) + " d ago";
  return new Date(ts * 1000).toLocaleDateString();
}
function size(n) {
  return n < 1024 ? n + " B" : n < 1048576 ? Math.round(n / 1024) + " KB" : (n / 1048576).toFixed(1) + " MB";
}
// Text with the searched words marked, built as nodes: nothing typed or stored is ever parsed as HTML.
function marked(parent, text, words) {
  if (!words.length) { parent.append(text); return; }
  const pattern = new RegExp("(" + words.map(w => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|") + ")", "gi");
  text.split(pattern).forEach((piece, i) => {
    if (i % 2) { const m = document.createElement("mark"); m.textContent = piece; parent.append(m); }
    else if (piece) parent.append(piece);
  });
}

// ---- messages ---------------------------------------------------------------------------------------

function renderFiles(el, list) {
  if (!list || !list.length) return;
  const box = document.createElement("div"); box.className = "files";
  for (const f of list) {
    const a = document.createElement("a"); a.href = f.url; a.target = "_blank"; a.rel = "noopener noreferrer";
    if (f.kind === "image") {
      const img = document.createElement("img"); img.src = f.url; img.alt = f.name; img.loading = "lazy";
      a.append(img);
    } else {
      a.className = "file"; a.download = f.name; a.append(f.name);
      const s = document.createElement("small"); s.textContent = size(f.size || 0); a.append(s);
    }
    box.append(a);
  }
  el.append(box);
}
function copyButtons(el) {
  for (const pre of el.querySelectorAll("pre")) {
    const wrap = document.createElement("div"); wrap.className = "code";
    const head = document.createElement("div"); head.className = "code-head";
    const lang = document.createElement("span");
    const named = [...(pre.firstElementChild || pre).classList].find(c => c.startsWith("language-"));
    lang.textContent = named ? named.slice(9) : "";
    pre.replaceWith(wrap); wrap.append(head, pre);
    const btn = document.createElement("button"); btn.type = "button"; btn.className = "copy"; btn.textContent = "Copy";
    btn.onclick = async () => {
      const text = pre.textContent;
      try { await navigator.clipboard.writeText(text); }
      catch (e) {  // not a secure context (a LAN address over http): the old way
        const area = document.createElement("textarea"); area.value = text; document.body.append(area);
        area.select(); document.execCommand("copy"); area.remove();
      }
      btn.textContent = "Copied"; btn.classList.add("done");
      setTimeout(() => { btn.textContent = "Copy"; btn.classList.remove("done"); }, 1500);
    };
    head.append(lang, btn);
  }
}
function render(m) {
  let el = nodes.get(m.id);
  if (!el) { el = document.createElement("div"); el.dataset.id = m.id; nodes.set(m.id, el); log.appendChild(el); }
  el.className = "msg " + m.role;
  el.replaceChildren();
  // Assistant messages come as HTML the server rendered from markdown with every raw tag escaped;
  // anything else is shown as the text it is.
  if (m.role === "assistant" && typeof m.html === "string") {
    const body = document.createElement("div"); body.className = "html"; body.innerHTML = m.html;
    copyButtons(body); el.append(body);
  } else if (m.text) {
    const body = document.createElement("div"); body.className = "text"; body.textContent = m.text; el.append(body);
  }
  renderFiles(el, m.files);
  if (m.buttons && m.buttons.length) {
    const row = document.createElement("div"); row.className = "buttons";
    for (const b of m.buttons) {
      const btn = document.createElement("button"); btn.type = "button"; btn.textContent = b.label;
      if (b.style === "primary" || b.style === "danger") btn.className = b.style;
      btn.onclick = () => press(b.id, btn);
      row.appendChild(btn);
    }
    el.appendChild(row);
  }
  if (highlight.length) {
    const text = (m.text || "").toLowerCase();
    el.classList.toggle("hit", highlight.every(w => text.includes(w.toLowerCase())));
  }
  log.scrollTop = log.scrollHeight;
}
function showHits() {
  const first = log.querySelector(".msg.hit");
  if (first) first.scrollIntoView({ block: "center" });
}

// ---- the API ------------------------------------------------------------------------------------------

async function api(path, opts = {}) {
  const headers = { "Authorization": "Bearer " + token, ...(opts.headers || {}) };
  if (typeof opts.body === "string") headers["Content-Type"] = "application/json";
  const r = await fetch(path, { ...opts, headers });
  if (r.status === 401) throw new Unauthorised();
  if (!r.ok) {
    const e = new Error((await r.json().catch(() => ({}))).error || r.statusText); e.status = r.status; throw e;
  }
  return r.json();
}
const chatPath = id => "/api/v1/chats/" + encodeURIComponent(id);
function failed(e) {
  if (e instanceof Unauthorised) askForToken("The token this page had was not accepted (Herald's web_token changed, or it belongs to another Herald).");
  else errorBox.textContent = e.message;
}
async function press(buttonId, btn) {
  // Answered at once; the notice for the presser arrives on the event stream.
  if (btn) btn.disabled = true;
  try { await api(`${chatPath(chatId)}/buttons/${encodeURIComponent(buttonId)}`, { method: "POST", body: JSON.stringify({ user_id: userId }) }); }
  catch (e) { if (btn) btn.disabled = false; failed(e); }
}

// ---- the list of chats ----------------------------------------------------------------------------------

// A chat not started yet is a "New chat"; one without a title (a cron job's reports only) is untitled.
const titleOf = c => c.title || (c.last_activity ? "Untitled chat" : "New chat");
function currentTitle() {
  const c = chats.find(c => c.id === chatId);
  return c ? titleOf(c) : "New chat";
}
function showList() {
  const items = chats.slice();
  if (!items.some(c => c.id === chatId)) items.unshift({ id: chatId, title: null, last_activity: null });
  chatsEl.replaceChildren(...items.map(c => {
    const b = document.createElement("button"); b.type = "button"; b.className = "chat"; b.dataset.id = c.id;
    b.setAttribute("aria-current", c.id === chatId ? "true" : "false");
    const name = document.createElement("span"); name.className = "name"; name.textContent = titleOf(c);
    const when = document.createElement("time"); when.textContent = c.last_activity ? ago(c.last_activity) : "not started";
    b.append(name, when);
    b.onclick = () => { highlight = []; openChat(c.id); };
    return b;
  }));
  titleEl.textContent = currentTitle();
  document.title = chats.some(c => c.id === chatId) ? currentTitle() + " — Herald" : "Herald";
}
async function loadList() {
  try { chats = (await api("/api/v1/chats")).chats; showList(); }
  catch (e) { failed(e); }
}
function refreshList() { clearTimeout(listTimer); listTimer = setTimeout(loadList, 300); }
setInterval(() => { if (token) showList(); }, 30000);

function openChat(id) {
  if (streamAbort) { streamAbort.abort(); streamAbort = null; }
  chatId = id; localStorage.setItem(CHAT_KEY, id);
  nodes = new Map(); log.replaceChildren(); typing.textContent = ""; errorBox.textContent = "";
  endRename(); resetDelete(); closeSide(); showList();
  if (token) stream();
}
$("newchat").onclick = () => { highlight = []; searchBox.value = ""; showResults(null); openChat(newId()); $("text").focus(); };

// ---- search ----------------------------------------------------------------------------------------------

function showResults(results, words) {
  resultsEl.hidden = results === null; chatsEl.hidden = results !== null;
  if (results === null) return;
  if (!results.length) {
    const p = document.createElement("p"); p.className = "empty"; p.textContent = "No messages found.";
    resultsEl.replaceChildren(p); return;
  }
  resultsEl.replaceChildren(...results.map(r => {
    const b = document.createElement("button"); b.type = "button"; b.className = "result"; b.dataset.chat = r.chat_id;
    const name = document.createElement("span"); name.className = "name"; name.textContent = r.title || "Untitled chat";
    const snippet = document.createElement("span"); snippet.className = "snippet"; marked(snippet, r.snippet, words);
    const when = document.createElement("time"); when.textContent = (r.role === "user" ? "you, " : "Herald, ") + ago(r.at);
    b.append(name, snippet, when);
    b.onclick = () => { highlight = words; openChat(r.chat_id); };
    return b;
  }));
}
async function search() {
  const q = searchBox.value.trim();
  if (!q) { showResults(null); return; }
  try {
    const body = await api("/api/v1/search?q=" + encodeURIComponent(q));
    if (searchBox.value.trim() === q) showResults(body.results, q.match(/[\p{L}\p{N}_]+/gu) || []);
  } catch (e) { failed(e); }
}
searchBox.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(search, 250); });
searchBox.addEventListener("keydown", ev => { if (ev.key === "Enter") { clearTimeout(searchTimer); search(); } if (ev.key === "Escape") { searchBox.value = ""; showResults(null); } });

// ---- rename and delete ------------------------------------------------------------------------------------

const renameForm = $("renameform"), renameInput = $("renameinput"), deleteBtn = $("delete");
function endRename() { renameForm.hidden = true; titleEl.hidden = false; $("rename").hidden = false; }
$("rename").onclick = () => {
  renameInput.value = chats.some(c => c.id === chatId) ? currentTitle() : "";
  renameForm.hidden = false; titleEl.hidden = true; $("rename").hidden = true;
  renameInput.focus(); renameInput.select();
};
renameInput.addEventListener("keydown", ev => { if (ev.key === "Escape") endRename(); });
renameForm.addEventListener("submit", async ev => {
  ev.preventDefault();
  const title = renameInput.value.trim(); if (!title) { endRename(); return; }
  try {
    await api(chatPath(chatId), { method: "PATCH", body: JSON.stringify({ title }) });
    const c = chats.find(c => c.id === chatId); if (c) c.title = title;
    endRename(); showList(); refreshList();
  } catch (e) { failed(e); }
});
let deleteTimer = null;
const deleteIcon = deleteBtn.querySelector("svg");
function resetDelete() { clearTimeout(deleteTimer); deleteBtn.classList.remove("confirming"); deleteBtn.textContent = ""; deleteBtn.append(deleteIcon); deleteBtn.setAttribute("aria-label", "Delete"); }
deleteBtn.onclick = async () => {
  if (!deleteBtn.classList.contains("confirming")) {
    // Two clicks, no dialog: the first asks, the second deletes.
    deleteBtn.classList.add("confirming"); deleteBtn.textContent = "Delete?"; deleteBtn.setAttribute("aria-label", "Confirm delete");
    deleteTimer = setTimeout(resetDelete, 5000);
    return;
  }
  resetDelete();
  if (!chats.some(c => c.id === chatId)) { openChat(newId()); return; }  // never started: nothing to delete
  try {
    await api(chatPath(chatId), { method: "DELETE" });
    gone(chatId);
  } catch (e) { failed(e); }
};
function gone(id) {
  chats = chats.filter(c => c.id !== id);
  if (id === chatId) openChat(chats.length ? chats[0].id : newId()); else showList();
}

// ---- files -------------------------------------------------------------------------------------------------

function showPending() {
  pendingEl.replaceChildren(...files.map((f, i) => {
    const chip = document.createElement("span"); chip.className = "chip";
    const name = document.createElement("span"); name.textContent = `${f.name} (${size(f.size)})`;
    const x = document.createElement("button"); x.type = "button"; x.textContent = "×"; x.setAttribute("aria-label", "remove " + f.name);
    x.onclick = () => { files.splice(i, 1); showPending(); };
    chip.append(name, x); return chip;
  }));
}
fileInput.addEventListener("change", () => { files.push(...fileInput.files); fileInput.value = ""; showPending(); });

// ---- the token ---------------------------------------------------------------------------------------------

function askForToken(why) {
  // A missing or refused token stops everything that would keep retrying and asks for a new one.
  if (streamAbort) { streamAbort.abort(); streamAbort = null; }
  localStorage.removeItem(TOKEN_KEY); token = null;
  setStatus("not connected", "");
  $("tokenwhy").textContent = why;
  tokenForm.hidden = false; log.hidden = true; compose.hidden = true; errorBox.textContent = "";
  $("tokeninput").focus();
}
tokenForm.addEventListener("submit", async ev => {
  ev.preventDefault();
  const candidate = tokenFrom($("tokeninput").value);
  if (!candidate) { $("tokenerror").textContent = "Paste the token (or the address herald web-url printed)."; return; }
  token = candidate;
  try { await api("/api/v1/status"); }
  catch (e) {
    token = null;
    $("tokenerror").textContent = e instanceof Unauthorised ? "Herald did not accept that token. Run herald web-url again and copy all of it." : e.message;
    return;
  }
  localStorage.setItem(TOKEN_KEY, token);
  $("tokeninput").value = ""; $("tokenerror").textContent = "";
  tokenForm.hidden = true; log.hidden = false; compose.hidden = false;
  stream();
});

// ---- the event stream -----------------------------------------------------------------------------------------

function handleFrame(frame) {
  let event = "message", data = "";
  for (const line of frame.split("\n")) {
    if (line.startsWith("event: ")) event = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const d = JSON.parse(data);
  if (event === "notice") { showNotice(d.text); return; }
  if (event === "typing") { typing.textContent = "Herald is working…"; clearTimeout(typingTimer); typingTimer = setTimeout(() => typing.textContent = "", 6000); return; }
  if (event === "activity" || event === "renamed") { refreshList(); return; }
  if (event === "deleted") { gone(d.chat_id); refreshList(); return; }
  if (d.role === "assistant") typing.textContent = "";
  render(d);
  if (event === "message") refreshList();
}
async function stream() {
  // fetch-based SSE so the token goes in a header, not the URL. A 401 ends the loop (askForToken); opening
  // another chat aborts this one's.
  const abort = streamAbort = new AbortController();
  const id = chatId;
  while (!abort.signal.aborted) {
    try {
      setStatus(nodes.size ? "reconnecting…" : "connecting…", "");
      const r = await fetch(`${chatPath(id)}/events?activity=1`, { headers: { "Authorization": "Bearer " + token }, signal: abort.signal });
      if (r.status === 401) throw new Unauthorised();
      if (!r.ok) throw new Error("the event stream answered " + r.status);
      const reader = r.body.getReader(); const dec = new TextDecoder(); let buf = "";
      const history = await api(`${chatPath(id)}/messages`, { signal: abort.signal });
      if (abort.signal.aborted) return;
      history.messages.forEach(render); showHits();
      setStatus("connected", "connected"); errorBox.textContent = "";
      loadList();  // once the token is known to be good; again after a reconnection, for what changed meanwhile
      while (true) {
        const { value, done } = await reader.read(); if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) { handleFrame(buf.slice(0, i)); buf = buf.slice(i + 2); }
      }
    } catch (e) {
      if (abort.signal.aborted) return;
      if (e instanceof Unauthorised) { failed(e); return; }
      errorBox.textContent = "Connection lost (" + e.message + "); retrying…";
    }
    setStatus("reconnecting…", "");
    await new Promise(r => setTimeout(r, 2000));
  }
}

// ---- sending --------------------------------------------------------------------------------------------------

compose.addEventListener("submit", async ev => {
  ev.preventDefault();
  const box = $("text"); const text = box.value.trim();
  if (!text && !files.length) return;
  const sending = files; const id = chatId;
  box.value = ""; files = []; showPending(); errorBox.textContent = "";
  try {
    if (sending.length) {
      const form = new FormData();
      form.append("user_id", userId); form.append("text", text);
      for (const f of sending) form.append("file", f, f.name);
      await api(`${chatPath(id)}/messages`, { method: "POST", body: form });
    } else {
      await api("/api/v1/messages", { method: "POST", body: JSON.stringify({ chat_id: id, user_id: userId, text }) });
    }
  } catch (e) { box.value = text; files = sending; showPending(); failed(e); }
});
$("text").addEventListener("keydown", ev => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); compose.requestSubmit(); }
});

// ---- the list on a phone ----------------------------------------------------------------------------------------

function closeSide() { sidebar.classList.remove("open"); scrim.hidden = true; }
$("menu").onclick = () => { sidebar.classList.add("open"); scrim.hidden = false; loadList(); };
$("closeside").onclick = closeSide;
scrim.onclick = closeSide;

// A phone's composer is narrow: the keys' hint would wrap over three lines.
const narrow = matchMedia("(max-width: 760px)"), hint = $("text").placeholder;
const placeholder = () => { $("text").placeholder = narrow.matches ? "Message Herald" : hint; };
narrow.addEventListener("change", placeholder); placeholder();
showList();
if (!token) askForToken("This page has no access token yet.");
else stream();
