(function () {
  "use strict";
  document.documentElement.classList.add("js");
  function cellValue(row, i) {
    var cell = row.cells[i];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-value");
    return v === null ? cell.textContent.trim() : v;
  }
  function sortBy(table, i, numeric) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = table.getAttribute("data-dir-" + i) === "asc" ? -1 : 1;
    table.setAttribute("data-dir-" + i, dir === 1 ? "asc" : "desc");
    rows.sort(function (a, b) {
      var x = cellValue(a, i), y = cellValue(b, i);
      if (numeric) {
        var fx = x === "" ? -Infinity : parseFloat(x), fy = y === "" ? -Infinity : parseFloat(y);
        return dir * (fx - fy);
      }
      return dir * x.localeCompare(y);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, i) {
      if (!th.hasAttribute("data-sort")) { return; }
      th.title = "sort";
      th.addEventListener("click", function () {
        sortBy(table, i, th.getAttribute("data-sort") === "num");
      });
    });
  });
  document.querySelectorAll("form.filters").forEach(function (form) {
    var table = document.getElementById(form.getAttribute("data-table"));
    var count = form.querySelector(".shown");
    function apply() {
      var tag = form.elements.tag.value, verdict = form.elements.verdict.value, n = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var tags = (row.getAttribute("data-tags") || "").split(" ");
        var ok = (tag === "" || tags.indexOf(tag) >= 0) &&
          (verdict === "" || row.getAttribute("data-verdict") === verdict);
        row.hidden = !ok;
        if (ok) { n += 1; }
      });
      if (count) { count.textContent = String(n); }
    }
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (e) { e.preventDefault(); apply(); });
    form.hidden = false;
    apply();
  });
  var pick = document.getElementById("pick");
  if (pick) {
    pick.hidden = false;
    pick.addEventListener("submit", function (e) {
      e.preventDefault();
      var a = pick.elements.a.value, b = pick.elements.b.value;
      var note = pick.querySelector(".pick-note");
      if (a === b) { note.textContent = "Pick two different runs."; return; }
      window.location.href = a + "--" + b + ".html";
    });
  }
})();
