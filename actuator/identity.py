"""Who the Kubernetes credentials in use belong to: a SelfSubjectReview through the gateway.

Why: an approval or an apply must be attributed to someone the cluster vouches for, not to a
name the caller typed. `authentication.k8s.io/v1` SelfSubjectReview (GA since Kubernetes 1.28,
allowed to every authenticated user by the default `system:basic-user` role) returns the user
name and groups the API server authenticated — the token's ServiceAccount, the OIDC user, or
the impersonated user when the kubeconfig impersonates. The role map (`core.access`) then turns
them into roles, exactly as the dashboard does with the proxy's headers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuledger.core.errors import ClusterError

if TYPE_CHECKING:
    from gpuledger.actuator.gateway import ClusterGateway

REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def cluster_identity(gateway: ClusterGateway) -> tuple[str, list[str]]:
    """The user name and groups of the gateway's credentials, as the API server sees them."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = gateway.request("POST", REVIEW_PATH, what="SelfSubjectReview (who am I)", body=body)
    info = (answer.get("status") or {}).get("userInfo") or {}
    user = info.get("username")
    if not isinstance(user, str) or not user:
        raise ClusterError("SelfSubjectReview: the API server named no user for these credentials")
    groups = info.get("groups") or []
    return user, [str(g) for g in groups if isinstance(g, str)]
