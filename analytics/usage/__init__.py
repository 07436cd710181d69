"""Card-hours held per hour and per day: `hourly` (the `card_hours_hourly` frame from raw
samples and device shares), `rollup` (the stored hourly roll-up and `allocations`, built once per
closed day, stamped with its rules), `plan` (which hours a reader takes from the roll-up and
which from raw samples, under which rules) and `daily` (usage per day, device and holder, from
the parts a plan names). May import `sampling` and `devices` (and core, warehouse); never
billing or anything above it.
"""
