/* stepscope dashboard: the token that controls need.
 *
 * The URL `stepscope ui` prints carries it (?token=...): it is moved into
 * sessionStorage and out of the address bar. A tab opened without it (a bookmark,
 * a new window) can still view (on loopback, or with the cookie a first visit
 * set), but the server refuses its controls: then the page asks for the token in
 * a small form in the header, keeps it in sessionStorage and sends the request
 * again (DashToken.ask; api() in dash-core.js does this on a 401/403).
 */
(function (global) {
  "use strict";
  const KEY = "stepscope-token";

  function fromUrl() {
    const url = new URL(global.location.href);
    const given = url.searchParams.get("token");
    if (given) {
      global.sessionStorage.setItem(KEY, given);
      url.searchParams.delete("token");
      global.history.replaceState(null, "", url.pathname + url.search + url.hash);
    }
    return global.sessionStorage.getItem(KEY) || "";
  }
  let token = fromUrl();
  let asking = null;  // one form at a time: concurrent refusals wait for the same answer

  /* Show the form with the server's reason; resolves true once a token was entered
   * (stored), false when the user cancels. */
  function ask(reason) {
    if (asking) return asking;
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    document.getElementById("token-why").textContent = reason || "This needs the dashboard's token.";
    form.hidden = false;
    input.value = "";
    input.focus();
    asking = new Promise((resolve) => {
      function done(ok) {
        form.removeEventListener("submit", onSubmit);
        document.getElementById("token-cancel").removeEventListener("click", onCancel);
        form.hidden = true;
        asking = null;
        resolve(ok);
      }
      function onSubmit(e) {
        e.preventDefault();
        const value = input.value.trim();
        if (!value) return;
        token = value;
        global.sessionStorage.setItem(KEY, value);
        done(true);
      }
      function onCancel() { done(false); }
      form.addEventListener("submit", onSubmit);
      document.getElementById("token-cancel").addEventListener("click", onCancel);
    });
    return asking;
  }

  /* Whether a refusal is about the token (and entering one may help). */
  function refusedForToken(status, message) {
    return status === 401 || (status === 403 && /token/i.test(message || ""));
  }

  global.DashToken = {get: () => token, ask, refusedForToken};
})(window);
