// coord's live pages: on every `board` event from /v1/events, fetch the page's `main` again
// from the server (rendered HTML; `data-live` names where, `data-whole` says the answer is a
// whole page to take the `main` of) and put it in place; while a field in `main` has the
// focus, wait until it loses it. The pages' forms work without this script (each answers 303
// back to its page); with it they are posted here and the page refreshes in place, an error
// shown in #said. No framework; served from the binary.
"use strict";
(function () {
  const main = document.querySelector("main[data-live]");
  const live = document.getElementById("live");
  const said = document.getElementById("said");
  let busy = false;
  let again = false;

  function contentOf(text) {
    if (!("whole" in main.dataset)) return text;
    const fresh = new DOMParser().parseFromString(text, "text/html").querySelector("main[data-live]");
    return fresh ? fresh.innerHTML : null;
  }

  function typing() {
    const a = document.activeElement;
    return a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }

  async function reload() {
    if (!main) return;
    if (busy || typing()) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(main.dataset.live, { credentials: "same-origin", cache: "no-store" });
      const html = r.ok ? contentOf(await r.text()) : null;
      if (html !== null) main.innerHTML = html;
    } catch (e) {
      if (live) live.textContent = "offline";
    } finally {
      busy = false;
      if (again) { again = false; reload(); }
    }
  }

  function tell(text) {
    if (!said) return;
    said.textContent = text;
    said.hidden = text === "";
  }

  async function post(form) {
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const r = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin",
        redirect: "manual",
      });
      if (r.type === "opaqueredirect" || r.ok) {
        tell("");
        if (!main || !main.contains(form)) form.reset();
      } else {
        let detail = r.status + " " + r.statusText;
        try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
        tell(detail);
      }
    } catch (e) {
      tell("the server did not answer");
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
      if (document.activeElement && form.contains(document.activeElement)) document.activeElement.blur();
      reload();
    }
  }

  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (form.method !== "post") return;
    ev.preventDefault();
    post(form);
  });
  if (main) main.addEventListener("focusout", () => { if (again) setTimeout(reload, 0); });

  const events = new EventSource("/v1/events");
  events.addEventListener("ready", () => { if (live) live.textContent = "live"; reload(); });
  events.addEventListener("board", reload);
  events.onerror = () => { if (live) live.textContent = "reconnecting…"; };
})();
