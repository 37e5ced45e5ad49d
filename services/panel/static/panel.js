// Copy buttons and confirmations. Nothing here stores anything: a key
// shown once lives only in this page's DOM.
"use strict";
document.querySelectorAll("[data-copy]").forEach((b) => {
  b.addEventListener("click", async () => {
    const el = document.getElementById(b.dataset.copy);
    el.select();
    try { await navigator.clipboard.writeText(el.value); b.textContent = "Copied"; }
    catch { document.execCommand("copy"); b.textContent = "Copied"; }
  });
});
document.querySelectorAll("form.confirm").forEach((f) => {
  f.addEventListener("submit", (e) => { if (!window.confirm(f.dataset.confirm)) e.preventDefault(); });
});
