"""`gpuledger plans export ID -o yaml|json`: a plan as the manifests that would apply it.

For GitOps: the output goes to a repository (or `kubectl apply --server-side -f -`) instead of
gpuledger applying it (`actuator.export`). `--server-dry-run` first sends every manifest to the
cluster as a server-side apply with dryRun=All (nothing is stored), so a manifest the CRD schema
or admission would refuse fails here, in one line, before it reaches the repository.
"""

from __future__ import annotations

import argparse

import click

from gpuledger.command_context import Context
from gpuledger.commands import plan_id_argument, runs


@click.command("export", help="write a plan's manifests (ClusterQueues; mig-parted ConfigMap and "
                              "node labels) instead of applying them")
@plan_id_argument
@click.option("-o", "--output", "format", type=click.Choice(("yaml", "json")), default="yaml",
              show_default=True, help="YAML documents or a JSON List")
@click.option("--server-dry-run", is_flag=True,
              help="check every manifest with a server-side apply dry run first (needs a cluster)")
@click.option("--kubeconfig", metavar="FILE",
              help="kubeconfig for --server-dry-run (default: kubernetes.kubeconfig, in-cluster, ~/.kube)")
@runs
def export_command(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.export import dry_run, export_objects, render
    from gpuledger.optimizer.plan.store import load_record, resolve_plan_id

    with ctx.open_warehouse(read_only=True) as wh:
        record = load_record(wh, resolve_plan_id(wh, args.plan_id))
    objects = export_objects(record.plan, ctx.settings)
    if args.server_dry_run:
        from gpuledger.actuator.workflow import connect

        with connect(ctx.settings, args.kubeconfig) as cluster:
            dry_run(cluster, objects)
    ctx.echo(render([doc for _, doc in objects], args.format).rstrip("\n"))
    return 0


VERBS = (export_command,)
