"""The sampling model: from raw DCGM samples to held intervals, card-hours per hour and idle runs.

`model` states the model (`SampleRules`, the frames it hands on), `steps` its steps and the SQL
of step 1, `read` the series read of the samples, `sweep` steps 2–7 in one pass over sorted
arrays. The bottom room of analytics beside `devices` and `teams`: may import `gpuledger.core`
and `gpuledger.warehouse` (its named queries), no other room of analytics.
"""
