"""The sampling model: from raw DCGM samples to held intervals, card-hours per hour and idle runs.

`sweep` states the model (its rules are `core.rules.SamplingRules`, its activity rule
`core.activity`) and runs it: step 1 is the read (`warehouse.queries.sampling`), steps 2-7 one
pass over sorted arrays. `results` shapes the pass's pieces into the frames consumers read
(the hourly frame, allocations, idle runs). The bottom room of analytics beside `devices` and
`teams`: may import `gpuledger.core` and `gpuledger.warehouse` (its named queries), no other
room of analytics.
"""
