"""Test and CI tooling, never installed: the real kube-apiserver test environment, metrics servers,
the MIG Manager emulator, the GPU check. May import any `gpuledger` package."""
