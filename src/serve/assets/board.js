// coord's live pages: on every `board` event from /v1/events, fetch the page's `main` again
// from the server (rendered HTML; `data-live` names where, `data-whole` says the answer is a
// whole page to take the `main` of) and put it in place. No framework; served from the binary.
"use strict";
(function () {
  const main = document.querySelector("main[data-live]");
  const live = document.getElementById("live");
  let busy = false;
  let again = false;

  function contentOf(text) {
    if (!("whole" in main.dataset)) return text;
    const fresh = new DOMParser().parseFromString(text, "text/html").querySelector("main[data-live]");
    return fresh ? fresh.innerHTML : null;
  }

  async function reload() {
    if (!main) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(main.dataset.live, { credentials: "same-origin", cache: "no-store" });
      const html = r.ok ? contentOf(await r.text()) : null;
      if (html !== null) main.innerHTML = html;
    } catch (e) {
      live.textContent = "offline";
    } finally {
      busy = false;
      if (again) { again = false; reload(); }
    }
  }

  const events = new EventSource("/v1/events");
  events.addEventListener("ready", () => { live.textContent = "live"; reload(); });
  events.addEventListener("board", reload);
  events.onerror = () => { live.textContent = "reconnecting…"; };
})();
