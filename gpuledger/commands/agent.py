"""`gpuledger agent --port P`: expose this node's GPUs on `/metrics` like dcgm-exporter, via NVML.

For nodes without DCGM. Read-only: it never changes MIG mode, clocks or any other setting.
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import runs
from gpuledger.core.errors import SourceError


def _run(args: argparse.Namespace, ctx: Context) -> int:
    try:
        import pynvml
    except ImportError:
        raise SourceError("agent: the nvidia-ml-py package (pynvml) is not installed") from None
    from gpuledger.collectors.nvml_agent import Agent

    try:
        agent = Agent(pynvml, args.host, args.port, hostname=args.hostname)
    except pynvml.NVMLError as exc:
        raise SourceError(f"agent: NVML is not usable on this machine ({exc})") from None
    except OSError as exc:
        reason = exc.strerror or exc
        raise SourceError(f"agent: cannot listen on {args.host}:{args.port} ({reason})") from None
    ctx.echo(f"serving NVML metrics on http://{args.host}:{agent.port}/metrics")
    try:
        agent.serve_forever()
    finally:
        agent.stop()
    return 0


@click.command("agent", help="serve this node's GPUs on /metrics like dcgm-exporter (NVML, read-only)")
@click.option("--port", type=int, default=9400, help="listen port (default 9400, dcgm-exporter's)")
@click.option("--host", default="0.0.0.0", help="listen address (default all interfaces)")
@click.option("--hostname", help="value of the Hostname label (default: this machine's name)")
@runs
def command(args: argparse.Namespace, ctx: Context) -> int:
    return _run(args, ctx)
