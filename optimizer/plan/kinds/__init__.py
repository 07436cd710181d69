"""The plan kinds' optimizer-stage parts, one module per kind, named after it.

`optimizer.plan.contract.PLAN_KINDS` imports `optimizer.plan.kinds.<name>` the first time a plan
of kind `<name>` is read, shown or listed, and the module registers its `PlanKind`: the model of
its changes, its changes table (`plans show`) and its one-line summary (`plans list`). The
actuator's part (the rollout) is `actuator.plan_kinds.<name>`, in that stage's own registry.

A new kind, e.g. `autoscale`:

    class AutoscaleChanges(PlanChanges):
        kind: Literal["autoscale"] = "autoscale"
        deployments: tuple[...]

    PLAN_KINDS.register("autoscale", PlanKind(AutoscaleChanges, render=_table, summary=_line))

The built-in kinds' changes models (`MigChanges`, `QuotaChanges`) stay in the contract, which
their planners and rollouts import; a new kind's model lives in its own module.
"""
