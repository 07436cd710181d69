"""The ground: domain types, MIG geometry, the config model and errors.

Nothing in `core` imports another gpuledger package, and nothing here imports a heavy library
at module level, so every stage (and the CLI) can depend on it for free.
"""
