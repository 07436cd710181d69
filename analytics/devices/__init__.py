"""Device sources: how a card is handed out (whole, MIG, time-slice, vGPU) and what share of
the card each holder pays for.

`base.DeviceSource` is the interface, `registry.SOURCES` the list in precedence order; one
module per sharing mode implements it. A new sharing mode (DRA claims, ...) is one new module
here plus its line in the registry; the bill, roll-up and capacity code never name a mode.
`shares` is the share math, `unlabeled` splits cards without a holder label, `capacity` the
present and stranded card-time. A bottom room of analytics beside `sampling` and `teams`: may
import core and warehouse, no other room of analytics.
"""
