"""Per-workload analyses on top of the bill: requested vs used per workload (`requested`), idle
ranking (`idle`), workload profiles (`profiles`), right-sizing with savings (`recommend`) and
token cost (`tokens`). May import `billing` and every room below it (and core, warehouse);
never `advice` or `exports`.
"""
