"""The scheduling twin: the real kube-scheduler, KWOK (and later Kueue) against a test apiserver.

Step 1 of issue 36 (decision 0224): `harness.Twin` starts the parts built by `tools.twin_build`
against a `tools.k8s_testenv.LocalCluster`; the smoke test in tests/twin/ drives it.
"""
