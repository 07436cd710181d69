/* Click a column header of a `table.sortable` to sort its body rows by that column (again to
   reverse). Cells carry their unrounded value in `data-value`, so money sorts as numbers and
   empty cells ("–") sort last. The page is drawn by Dash after load, hence the delegation. */
document.addEventListener("click", function (event) {
  var th = event.target.closest && event.target.closest("table.sortable th[data-sort]");
  if (!th) { return; }
  var table = th.closest("table");
  var index = Array.prototype.indexOf.call(th.parentNode.children, th);
  var body = table.tBodies[0];
  var descending = th.getAttribute("aria-sort") !== "descending";
  Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  var rows = Array.prototype.slice.call(body.rows);
  function key(row) {
    var raw = row.cells[index].getAttribute("data-value");
    var num = parseFloat(raw);
    return raw === "" || raw === null ? null : (isNaN(num) ? raw : num);
  }
  rows.sort(function (a, b) {
    var x = key(a), y = key(b);
    if (x === null) { return y === null ? 0 : 1; }
    if (y === null) { return -1; }
    var order = x < y ? -1 : x > y ? 1 : 0;
    return descending ? -order : order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
});
