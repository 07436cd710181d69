"""One module per dashboard page: `view(ctx)` computes what the page shows (access checked
on the server), `render(view)` draws it, `show(ctx)` is what `dashboards.registry` calls.
"""
