// advisor console: refresh the page's <main> when the store moves, without a full reload.
// Polls /api/changes (the store's newest position); when it changed, fetches this page again
// and swaps in its <main>, unless the person is typing in one of its fields.
// Draws the charts: every [data-figure] element holds a plotly figure as JSON ({data, layout,
// config}); plotly.js (served by the console at /plotly.js) draws it, on load and again in the
// swapped-in <main> (no page carries an inline script).
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  var seq = document.body.getAttribute("data-seq");

  function draw(root) {
    if (!window.Plotly) { return; }
    var nodes = root.querySelectorAll("[data-figure]");
    for (var i = 0; i < nodes.length; i++) {
      try {
        var spec = JSON.parse(nodes[i].getAttribute("data-figure"));
        window.Plotly.newPlot(nodes[i], spec.data, spec.layout, spec.config);
      } catch (e) {
        nodes[i].textContent = "This chart cannot be drawn: " + e;
      }
    }
  }

  function purge(root) {
    if (!window.Plotly) { return; }
    var plots = root.querySelectorAll(".js-plotly-plot");
    for (var i = 0; i < plots.length; i++) { window.Plotly.purge(plots[i]); }
  }

  function typing() {
    var el = document.activeElement;
    return el && el.closest && el.closest("main") &&
      (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA") &&
      (el.value || el.tagName === "SELECT");
  }

  function swap(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("main");
    var main = document.getElementById("main");
    if (fresh && main) {
      purge(main);
      main.replaceWith(fresh);
      draw(fresh);
    }
    var stamp = doc.body.getAttribute("data-seq");
    document.body.setAttribute("data-seq", stamp);
    var shown = document.getElementById("seq");
    if (shown) { shown.textContent = stamp; }
  }

  function poll() {
    fetch("/api/changes", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.json(); })
      .then(function (body) {
        if (String(body.seq) === String(seq) || typing()) { return null; }
        seq = String(body.seq);
        return fetch(window.location.href, {credentials: "same-origin", cache: "no-store"})
          .then(function (r) { return r.text(); })
          .then(swap);
      })
      .catch(function () { /* the server is away: try again at the next tick */ })
      .then(function () { window.setTimeout(poll, INTERVAL_MS); });
  }
  draw(document);
  window.setTimeout(poll, INTERVAL_MS);
})();
