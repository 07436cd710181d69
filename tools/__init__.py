"""Test and CI tooling, never installed: the real kube-apiserver test environment, metrics servers,
the kube loader and the MIG Manager emulator (the code that writes a simulated fleet into a
cluster, kept out of the product's simulator), a node-label watch, the GPU check.
May import any `gpuledger` package."""
