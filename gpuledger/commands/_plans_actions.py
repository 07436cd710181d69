"""`gpuledger plans approve|reject|apply|rollback|expire`: the verbs that change a plan or the cluster.

Each verb is a thin wrapper over `actuator.workflow` (the dashboard's buttons call the same
functions, under the same `actuator.approval` policy): the user named by `--as` (default: the
login name) gets roles from the config's `access.roles`, only an admin may approve, reject, apply
or roll back, and `apply` starts a rollout only after `apply --dry-run` previewed it (within
15 minutes), exactly like the dashboard's Preview button.
"""

from __future__ import annotations

import argparse
import getpass
import json
from typing import TYPE_CHECKING, Any

from gpuledger.command_context import Context

if TYPE_CHECKING:
    from gpuledger.core.access import Principal


def _principal(args: argparse.Namespace, ctx: Context) -> Principal:
    from gpuledger.core.access import resolve_roles

    user = args.as_user or getpass.getuser()
    groups = [g for g in (args.groups or "").split(",") if g.strip()]
    return resolve_roles(user, groups, ctx.settings.access)


def _approve(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import approve

    with ctx.open_warehouse() as wh:
        record = approve(wh, args.plan_id, principal=_principal(args, ctx), settings=ctx.settings)
    ctx.echo(f"plan {args.plan_id}: {record.status}")
    return 0


def _reject(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import reject

    with ctx.open_warehouse() as wh:
        record = reject(wh, args.plan_id, principal=_principal(args, ctx), settings=ctx.settings,
                        reason=args.reason)
    ctx.echo(f"plan {args.plan_id}: {record.status}")
    return 0


def _expire(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import expire

    with ctx.open_warehouse() as wh:
        expired = expire(wh, settings=ctx.settings)
    ctx.echo(f"expired {len(expired)} plan(s)" + (": " + ", ".join(expired) if expired else ""))
    return 0


def _apply(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import apply, connect

    principal = _principal(args, ctx)
    with ctx.open_warehouse() as wh, connect(ctx.settings, args.kubeconfig) as cluster:
        result = apply(wh, args.plan_id, principal=principal, settings=ctx.settings, cluster=cluster,
                       dry_run=args.dry_run)
    _report(args, ctx, result)
    return 0 if result.ok else 1


def _rollback(args: argparse.Namespace, ctx: Context) -> int:
    from gpuledger.actuator.workflow import connect, rollback

    principal = _principal(args, ctx)
    with ctx.open_warehouse() as wh, connect(ctx.settings, args.kubeconfig) as cluster:
        result = rollback(wh, args.plan_id, principal=principal, settings=ctx.settings, cluster=cluster)
    _report(args, ctx, result)
    return 0 if result.ok else 1


def _report(args: argparse.Namespace, ctx: Context, result: Any) -> None:
    if args.format == "json":
        ctx.echo(json.dumps(result.to_dict(), indent=2, default=str))
        return
    ctx.echo(f"plan {result.plan_id} ({result.kind}) {result.action}: {result.status} — {result.message}")
    for step in result.steps:
        ctx.echo(f"  {step.object:<40} {step.state}{'  ' + step.detail if step.detail else ''}")
    for write in result.writes:
        mode = "dry-run" if write.dry_run else "written"
        ctx.echo(f"  {mode:<8} {write.verb:<6} {write.object}  {json.dumps(write.patch, default=str)[:200]}")


def register_verbs(verbs: argparse._SubParsersAction[Any]) -> None:
    """Add approve, reject, apply, rollback and expire to the `plans` command."""
    from gpuledger.commands import global_options

    inherited = [global_options(suppress=True)]

    def who(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as", dest="as_user", metavar="USER",
                       help="acting user, matched against access.roles (default: your login name)")
        p.add_argument("--groups", metavar="G,...", help="the user's groups, comma-separated")

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        return verbs.add_parser(name, help=help, description=help, parents=inherited)

    p = verb("approve", "approve a proposed plan (admin)")
    p.add_argument("plan_id", metavar="ID")
    who(p)
    p.set_defaults(handler=_approve)

    p = verb("reject", "reject a proposed or approved plan (admin)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--reason", default="rejected", help="why, for the audit log")
    who(p)
    p.set_defaults(handler=_reject)

    p = verb("apply", "apply an approved plan to the cluster, or resume one (admin; preview it first "
                      "with --dry-run)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--dry-run", action="store_true",
                   help="send every write with dryRun=All only; change nothing (the preview an apply needs)")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="kubeconfig (default: kubernetes.kubeconfig from the config, in-cluster, ~/.kube)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    who(p)
    p.set_defaults(handler=_apply)

    p = verb("rollback", "restore the recorded before-state of an applied plan (admin)")
    p.add_argument("plan_id", metavar="ID")
    p.add_argument("--kubeconfig", metavar="FILE")
    p.add_argument("--format", choices=("table", "json"), default="table")
    who(p)
    p.set_defaults(handler=_rollback)

    p = verb("expire", "mark proposed/approved plans older than plans.expire_after_hours as expired")
    p.set_defaults(handler=_expire)
