"""The roof: the `gpuledger` CLI and the wiring that composes the pipeline stages."""

__version__ = "0.1.0"
