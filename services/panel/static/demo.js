// The demo's two panes: an EventSource on a token the server mints (the
// demo topic, subscribe only), and a loop of the agent's watch_topic calls
// (each passes the previous call's cursor), plus the publish box.
"use strict";
(() => {
  const ssePane = document.getElementById("sse-pane");
  const watchPane = document.getElementById("watch-pane");
  const line = (pane, m) => {
    const li = document.createElement("li");
    li.textContent = `${m.cursor}  ${m.room ?? ""}  ${JSON.stringify(m.data)}`;
    pane.prepend(li);
    while (pane.children.length > 100) pane.lastChild.remove();
  };
  let position = "";
  async function sse() {
    const st = document.getElementById("sse-state");
    let t;
    try {
      const r = await fetch("/demo/token");
      t = await r.json();
      if (!r.ok) throw new Error(t.error);
    } catch (e) { st.textContent = "error: " + e.message; setTimeout(sse, 3000); return; }
    const q = new URLSearchParams({ token: t.token });
    if (position) q.set("cursor", position);
    const es = new EventSource(`/v1/topics/${encodeURIComponent(t.topic)}/events?${q}`);
    es.onopen = () => { st.textContent = "live"; };
    es.onmessage = (e) => { if (e.lastEventId) position = e.lastEventId; if (e.data) line(ssePane, JSON.parse(e.data)); };
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) { st.textContent = "reconnecting"; return; }
      st.textContent = "reconnecting"; setTimeout(sse, 2000);
    };
    es.addEventListener("msgmesh-closed", (e) => {
      if (e.lastEventId) position = e.lastEventId;
      es.close(); st.textContent = "reconnecting";
      setTimeout(sse, JSON.parse(e.data || "{}").reason === "token_expired" ? 0 : 2000);
    });
  }
  async function watch() {
    const st = document.getElementById("watch-state");
    let cursor = "";
    for (;;) {
      try {
        st.textContent = "watch_topic waiting";
        const r = await fetch("/demo/watch?" + new URLSearchParams(cursor ? { cursor } : {}));
        const out = await r.json();
        if (!r.ok) throw new Error(out.error);
        cursor = out.cursor;
        for (const ev of out.events) line(watchPane, ev);
        st.textContent = out.timed_out ? "timed out (nothing new), calling again" : `${out.events.length} event(s)`;
      } catch (e) { st.textContent = "error: " + e.message; await new Promise((r) => setTimeout(r, 3000)); }
    }
  }
  document.getElementById("demo-publish").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = e.target, out = document.getElementById("publish-result");
    const r = await fetch("/demo/publish", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: f.elements.text.value }) });
    const body = await r.json();
    out.textContent = r.ok ? "published at " + body.cursor : body.error;
    if (r.ok) f.elements.text.value = "";
  });
  sse();
  watch();
})();
