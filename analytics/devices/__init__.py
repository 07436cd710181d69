"""Device sources: how a card is handed out (whole, MIG, time-slice, vGPU) and what share of
the card each holder pays for.

`base.DeviceSource` is the interface, `registry.SOURCES` the list in precedence order; one
module per sharing mode implements it. A new sharing mode (DRA claims, ...) is one new module
here plus its line in the registry; the bill, roll-up and capacity code never name a mode.
May import core, warehouse and the rest of analytics.
"""
