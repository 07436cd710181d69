/* Cell renderers the grids name (`dashboards.pages.grid`, dash-ag-grid's
   `dashAgGridComponentFunctions`): `RowLink` draws the cell's text as a link to the row's
   `href` (the Teams grid: a team's name opens its page). */
var dagcomponentfuncs = (window.dashAgGridComponentFunctions = window.dashAgGridComponentFunctions || {});

dagcomponentfuncs.RowLink = function (props) {
  if (!props.data || !props.data.href) { return props.value; }
  return React.createElement("a", {href: props.data.href}, props.value);
};
