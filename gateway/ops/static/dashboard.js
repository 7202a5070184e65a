"use strict";
// The operator's dashboard: the server renders every view (/api/v1/dashboard/view); this script only keeps the
// token (the web chat's, from the URL fragment or pasted), swaps views in as the event stream sends them
// (keeping the scroll), shows times as "3 min ago", and posts the buttons' actions.
const TOKEN_KEY = "herald_token";  // the same key as the web chat: one token for both pages
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
const $ = id => document.getElementById(id);
const viewEl = $("view"), statusEl = $("status"), errorEl = $("error"), noticeEl = $("notice"), tokenForm = $("tokenform");
const CRON = "/dashboard/cron/";
const view = location.pathname.startsWith(CRON) ? "cron/" + decodeURIComponent(location.pathname.slice(CRON.length)) : "overview";
let streamAbort = null, noticeTimer = null;

class Unauthorised extends Error {}

async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json", ...(opts.headers || {}) } });
  if (r.status === 401) throw new Unauthorised("token refused");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}

function ago(seconds) {
  const a = Math.abs(seconds), future = seconds < 0;
  if (a < 5) return "just now";
  const text = a < 60 ? `${Math.round(a)} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} days`;
  return future ? `in ${text}` : `${text} ago`;
}
function relativeTimes() {
  const now = Date.now() / 1000;
  for (const el of viewEl.querySelectorAll("time[data-ts]")) el.textContent = ago(now - Number(el.dataset.ts));
}
setInterval(relativeTimes, 5000);

function show(html) {
  // Replacing the view's HTML keeps the window where it was; restore it anyway for browsers that jump.
  const x = window.scrollX, y = window.scrollY;
  viewEl.innerHTML = html;
  relativeTimes();
  window.scrollTo(x, y);
}

function notice(text) {
  noticeEl.textContent = text;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { noticeEl.textContent = ""; }, 6000);
}

function failed(e) {
  if (e instanceof Unauthorised) askForToken("The token this page had was not accepted (Herald's web_token changed, or it belongs to another Herald).");
  else errorEl.textContent = e.message;
}

async function load() {
  const body = await api("/api/v1/dashboard/view?view=" + encodeURIComponent(view));
  show(body.html);
  errorEl.textContent = "";
}

async function stream() {
  // fetch-based SSE so the token goes in a header, not the URL. A 401 ends the loop (askForToken).
  while (token) {
    const abort = new AbortController();
    streamAbort = abort;
    try {
      const r = await fetch("/api/v1/dashboard/events?view=" + encodeURIComponent(view), { headers: { "Authorization": "Bearer " + token }, signal: abort.signal });
      if (r.status === 401) throw new Unauthorised("token refused");
      if (!r.ok) throw new Error(`stream: HTTP ${r.status}`);
      statusEl.textContent = "live"; statusEl.className = "live";
      const reader = r.body.getReader(), decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          let event = "message", data = "";
          for (const line of frame.split("\n")) {
            if (line.startsWith("event:")) event = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (event === "view" && data) show(JSON.parse(data).html);
        }
      }
    } catch (e) {
      if (e instanceof Unauthorised) { askForToken("The token this page had was not accepted (Herald's web_token changed, or it belongs to another Herald)."); return; }
      if (abort.signal.aborted) return;
    }
    statusEl.textContent = "reconnecting…"; statusEl.className = "";
    await new Promise(ok => setTimeout(ok, 2000));
  }
}

function askForToken(why) {
  if (streamAbort) streamAbort.abort();
  localStorage.removeItem(TOKEN_KEY); token = null;
  $("tokenwhy").textContent = why;
  tokenForm.hidden = false; viewEl.hidden = true; errorEl.textContent = "";
  statusEl.textContent = "no token"; statusEl.className = "";
  $("tokeninput").focus();
}

tokenForm.addEventListener("submit", async ev => {
  ev.preventDefault();
  const candidate = tokenFrom($("tokeninput").value);
  if (!candidate) { $("tokenerror").textContent = "Paste the token (or the address herald web-url printed)."; return; }
  token = candidate;
  try { await load(); } catch (e) {
    token = null;
    $("tokenerror").textContent = e instanceof Unauthorised ? "Herald did not accept that token. Run herald web-url again and copy all of it." : e.message;
    return;
  }
  localStorage.setItem(TOKEN_KEY, token);
  $("tokeninput").value = ""; $("tokenerror").textContent = "";
  tokenForm.hidden = true; viewEl.hidden = false;
  stream();
});

document.addEventListener("click", async ev => {
  const button = ev.target.closest("button[data-action]");
  if (!button) return;
  if (button.dataset.action === "reset" && !button.classList.contains("confirming")) {
    // Two clicks, no dialog: the first asks, the second resets.
    button.classList.add("confirming"); button.textContent = "Confirm reset"; button.title = button.dataset.confirm || "";
    setTimeout(() => { button.classList.remove("confirming"); button.textContent = "Reset"; }, 5000);
    return;
  }
  button.disabled = true;
  try {
    let body;
    if (button.dataset.action === "approve") {
      body = await api(`/api/v1/dashboard/approvals/${encodeURIComponent(button.dataset.id)}`, { method: "POST", body: JSON.stringify({ choice: button.dataset.choice }) });
    } else if (button.dataset.action === "reset") {
      body = await api("/api/v1/dashboard/sessions/reset", { method: "POST", body: JSON.stringify({ key: button.dataset.key }) });
    }
    if (body && body.notice) notice(body.notice);
    await load();
  } catch (e) { failed(e); button.disabled = false; }
});

if (!token) askForToken("This page has no access token yet.");
else load().then(stream, e => { failed(e); if (!(e instanceof Unauthorised)) stream(); });
