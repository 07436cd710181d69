"""Build, cached, the parts of the scheduling twin: kube-scheduler, kube-controller-manager, KWOK, Kueue.

See `builder` for the steps and docs/decisions/0225-twin-build.md for why these parts and how the
Go build cache is shared with tools/k8s_testenv.
"""
