// Live tail: the browser's EventSource on a short-lived token the server
// mints for this topic (subscribe only, 5 minutes). A token_expired close
// gets a new token and resumes from the stream's own position.
"use strict";
(() => {
  const form = document.getElementById("tail");
  if (!form) return;
  const csrf = document.body.dataset.csrf;
  const rows = document.querySelector("#tail-rows tbody");
  const pos = document.getElementById("tail-position");
  const state = document.getElementById("tail-state");
  let es = null, position = "", stopped = true;

  async function token() {
    const r = await fetch(form.dataset.tokenUrl, { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.status);
    return body.token;
  }
  function show(m) {
    const tr = document.createElement("tr");
    for (const v of [m.cursor, m.room ?? "", m.published_at, m.data !== undefined ? JSON.stringify(m.data) : "base64 " + m.data_base64]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    rows.prepend(tr);
    while (rows.children.length > 200) rows.lastChild.remove();
  }
  async function open() {
    if (es) es.close();
    state.textContent = "connecting";
    let tok;
    try { tok = await token(); } catch (e) { state.textContent = "cannot subscribe: " + e.message; return; }
    const q = new URLSearchParams({ token: tok });
    const room = form.elements.room.value.trim();
    if (room) q.set("room", room);
    const from = position || form.elements.cursor.value.trim();
    if (from) q.set("cursor", from);
    es = new EventSource(`/v1/topics/${encodeURIComponent(form.dataset.topic)}/events?${q}`);
    es.onopen = () => { state.textContent = "live"; };
    es.onmessage = (e) => {
      if (e.lastEventId) { position = e.lastEventId; pos.value = position; }
      if (e.data) show(JSON.parse(e.data));
    };
    es.addEventListener("msgmesh-resync", (e) => {
      if (e.lastEventId) { position = e.lastEventId; pos.value = position; }
      state.textContent = "resync: messages were missed (beyond the replay window)";
    });
    es.addEventListener("msgmesh-closed", (e) => {
      if (e.lastEventId) { position = e.lastEventId; pos.value = position; }
      const why = JSON.parse(e.data || "{}");
      es.close(); es = null;
      if (stopped) return;
      if (why.reason === "topic_deleted" || why.reason === "credential_revoked" || why.reason === "tenant_suspended") {
        state.textContent = "ended: " + (why.error || why.reason);
        return;
      }
      state.textContent = "reconnecting (" + why.reason + ")";
      setTimeout(open, why.reason === "token_expired" ? 0 : 2000);
    });
    es.onerror = () => {
      if (!es) return;
      if (es.readyState === EventSource.CONNECTING) { state.textContent = "reconnecting"; return; }
      // Refused (the token expired while the connection was down, or the
      // node went away): a new token, from the last position.
      es.close(); es = null;
      if (!stopped) { state.textContent = "reconnecting"; setTimeout(open, 2000); }
    };
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); stopped = false; position = ""; rows.replaceChildren(); open(); });
  document.getElementById("tail-stop").addEventListener("click", () => { stopped = true; if (es) es.close(); es = null; state.textContent = "stopped"; });
  stopped = false;
  open();
})();
