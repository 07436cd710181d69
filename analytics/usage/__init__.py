"""Card-hours held per hour and per day: `hourly` (the `card_hours_hourly` frame from raw
samples and device shares), `rollup` (the stored hourly roll-up and `allocations`, built once per
closed day) and `daily` (usage per day, device and holder, from the roll-up and/or raw samples).
May import `sampling` and `devices` (and core, warehouse); never billing or anything above it.
"""
