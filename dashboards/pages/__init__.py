"""One module per dashboard page: `view(ctx)` computes what the page shows (access checked
on the server), `render(view)` draws it, `show(ctx)` is what `dashboards.registry` calls.

`dash_ag_grid` is imported here, with the package the app imports at start: Dash refuses a
component library first imported inside a callback, and a page module (with its grid,
`pages.grid`) may first load in one.
"""

import dash_ag_grid  # noqa: F401  (registers the component library before any callback runs)
