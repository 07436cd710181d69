"""Capacity now, by shape (`now`) and each queue's headroom (`headroom`): what a waiting
workload could get right now, and where (issue 35, docs/decisions/0200)."""
