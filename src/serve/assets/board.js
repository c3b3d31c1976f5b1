// coord's live board: on every `board` event from /v1/events, fetch the board again from
// the server (rendered HTML) and put it in place. No framework; served from the binary.
"use strict";
(function () {
  const board = document.getElementById("board");
  const live = document.getElementById("live");
  let busy = false;
  let again = false;

  async function reload() {
    if (!board) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(board.dataset.live, { credentials: "same-origin", cache: "no-store" });
      if (r.ok) board.innerHTML = await r.text();
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
