"""`gpuledger plans approve|reject|apply|rollback|expire`: the verbs that change a plan or the cluster.

Each verb is a thin wrapper over `actuator.workflow` (the dashboard's buttons call the same
functions, under the same `actuator.approval` policy): only an admin may approve, reject, apply
or roll back, and `apply` starts a rollout only after `apply --dry-run` previewed it (within
15 minutes), exactly like the dashboard's Preview button.

Who is acting is never the caller's say-so (anyone who can write the warehouse could otherwise
approve as an admin):
1. with a cluster (apply and rollback always; approve and reject when `--kubeconfig`,
   `kubernetes.kubeconfig` or an in-cluster ServiceAccount is there), the user and groups the
   API server authenticated for those credentials (`actuator.identity`, a SelfSubjectReview);
2. otherwise the operating-system account (`core.access.os_identity`, from the real user id);
3. `--as/--groups` are refused unless `--insecure-dev-identity` is given (development only);
   then the audit log records the claimed name next to the real account that claimed it.
The roles come from `access.roles` for that identity, as in the dashboard.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

import click

from gpuledger.command_context import Context
from gpuledger.commands import F, output_option, plan_id_argument, runs
from gpuledger.commands._output import emit
from gpuledger.core.errors import AccessDeniedError

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import ClusterGateway
    from gpuledger.core.access import Principal


def _principal(args: argparse.Namespace, ctx: Context, cluster: ClusterGateway | None) -> Principal:
    """The acting principal, by the rules of the module docstring."""
    from gpuledger.core.access import os_identity, resolve_roles

    os_user, os_groups = os_identity()
    if args.as_user or args.groups:
        if not args.insecure_dev_identity:
            raise AccessDeniedError(
                "--as/--groups declare an identity nobody vouches for; approve, reject, apply and "
                "rollback act as your Kubernetes credentials (or, without a cluster, your OS account "
                f"{os_user!r}); pass --insecure-dev-identity to use them in development"
            )
        groups = [g for g in (args.groups or "").split(",") if g.strip()]
        claimed = resolve_roles(args.as_user or os_user, groups, ctx.settings.access)
        return claimed.self_declared(f"OS user {os_user}, --insecure-dev-identity")
    if cluster is not None:
        from gpuledger.actuator.identity import cluster_identity

        user, groups = cluster_identity(cluster)
        return resolve_roles(user, groups, ctx.settings.access)
    return resolve_roles(os_user, os_groups, ctx.settings.access)


def _has_cluster(args: argparse.Namespace, ctx: Context) -> bool:
    """Whether approve/reject can ask a cluster who we are (apply and rollback always do)."""
    return bool(args.kubeconfig or ctx.settings.kubernetes.kubeconfig
                or os.environ.get("KUBERNETES_SERVICE_HOST"))


def _decide(args: argparse.Namespace, ctx: Context, verb: str) -> int:
    """Approve or reject, as the identity the cluster (or the OS) vouches for."""
    from gpuledger.actuator import workflow

    cluster = workflow.connect(ctx.settings, args.kubeconfig) if _has_cluster(args, ctx) else None
    try:
        principal = _principal(args, ctx, cluster)
    finally:
        if cluster is not None:
            cluster.close()
    from gpuledger.optimizer.plan.store import resolve_plan_id

    with ctx.open_warehouse() as wh:
        args.plan_id = resolve_plan_id(wh, args.plan_id)
        if verb == "approve":
            record = workflow.approve(wh, args.plan_id, principal=principal, settings=ctx.settings)
        else:
            record = workflow.reject(wh, args.plan_id, principal=principal, settings=ctx.settings,
                                     reason=args.reason)
    ctx.echo(f"plan {args.plan_id}: {record.status} (by {principal.actor})")
    return 0


def _approve(args: argparse.Namespace, ctx: Context) -> int:
    return _decide(args, ctx, "approve")


def _reject(args: argparse.Namespace, ctx: Context) -> int:
    return _decide(args, ctx, "reject")


def _expire(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import expire

    with ctx.open_warehouse() as wh:
        expired = expire(wh, settings=ctx.settings)
    ctx.echo(f"expired {len(expired)} plan(s)" + (": " + ", ".join(expired) if expired else ""))
    return 0


def _apply(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import apply, connect
    from gpuledger.optimizer.plan.store import resolve_plan_id

    with connect(ctx.settings, args.kubeconfig) as cluster:
        principal = _principal(args, ctx, cluster)
        with ctx.open_warehouse() as wh:
            result = apply(wh, resolve_plan_id(wh, args.plan_id), principal=principal,
                           settings=ctx.settings, cluster=cluster, dry_run=args.dry_run)
    _report(args, ctx, result)
    return 0 if result.ok else 1


def _rollback(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import connect, rollback
    from gpuledger.optimizer.plan.store import resolve_plan_id

    with connect(ctx.settings, args.kubeconfig) as cluster:
        principal = _principal(args, ctx, cluster)
        with ctx.open_warehouse() as wh:
            result = rollback(wh, resolve_plan_id(wh, args.plan_id), principal=principal,
                              settings=ctx.settings, cluster=cluster)
    _report(args, ctx, result)
    return 0 if result.ok else 1


def _report(args: argparse.Namespace, ctx: Context, result: Any) -> None:
    lines = [f"plan {result.plan_id} ({result.kind}) {result.action}: {result.status} — {result.message}"]
    for step in result.steps:
        lines.append(f"  {step.object:<40} {step.state}{'  ' + step.detail if step.detail else ''}")
    for write in result.writes:
        mode = "dry-run" if write.dry_run else "written"
        lines.append(f"  {mode:<8} {write.verb:<6} {write.object}  "
                     f"{json.dumps(write.patch, default=str)[:200]}")
    text = json.dumps(result.to_dict(), indent=2, default=str)
    body = json.loads(text)
    rows = [*body.get("steps", []), *body.get("writes", [])] or [
        {k: v for k, v in body.items() if not isinstance(v, dict | list)}]
    emit(ctx, args.format, json_text=text, rows=rows, text="\n".join(lines))


def _who(f: F) -> F:
    f = click.option("--insecure-dev-identity", is_flag=True,
                     help="development only: believe --as/--groups (the audit log says so)")(f)
    f = click.option("--groups", metavar="G,...", help="self-declared groups, comma-separated")(f)
    return click.option("--as", "as_user", metavar="USER",
                        help="self-declared acting user (refused without --insecure-dev-identity; "
                             "default: your Kubernetes credentials, or your OS account)")(f)


_KUBECONFIG = click.option("--kubeconfig", metavar="FILE", help="act as these Kubernetes credentials")


@click.command("approve", help="approve a proposed plan (admin)")
@plan_id_argument
@_KUBECONFIG
@_who
@runs
def approve_command(args: argparse.Namespace, ctx: Context) -> int:
    return _approve(args, ctx)


@click.command("reject", help="reject a proposed or approved plan (admin)")
@plan_id_argument
@click.option("--reason", default="rejected", show_default=True, help="why, for the audit log")
@_KUBECONFIG
@_who
@runs
def reject_command(args: argparse.Namespace, ctx: Context) -> int:
    return _reject(args, ctx)


@click.command("apply", help="apply an approved plan to the cluster, or resume one (admin; preview "
                             "it first with --dry-run)")
@plan_id_argument
@click.option("--dry-run", is_flag=True,
              help="send every write with dryRun=All only; change nothing (the preview an apply needs)")
@click.option("--kubeconfig", metavar="FILE",
              help="kubeconfig (default: kubernetes.kubeconfig from the config, in-cluster, ~/.kube)")
@output_option()
@_who
@runs
def apply_command(args: argparse.Namespace, ctx: Context) -> int:
    return _apply(args, ctx)


@click.command("rollback", help="restore the recorded before-state of an applied plan (admin)")
@plan_id_argument
@click.option("--kubeconfig", metavar="FILE")
@output_option()
@_who
@runs
def rollback_command(args: argparse.Namespace, ctx: Context) -> int:
    return _rollback(args, ctx)


@click.command("expire", help="mark proposed/approved plans older than plans.expire_after_hours as expired")
@runs
def expire_command(args: argparse.Namespace, ctx: Context) -> int:
    return _expire(args, ctx)


VERBS = (approve_command, reject_command, apply_command, rollback_command, expire_command)
