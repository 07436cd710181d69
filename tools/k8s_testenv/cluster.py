"""A real etcd + kube-apiserver on loopback ports, started the way controller-runtime's envtest does.

Why real: custom resources refusing strategic-merge patch (415), CRD schema and CEL rules (422),
stale resourceVersions (409), dry-run and RBAC (403) are exactly what a mock gets wrong.

Steps of `LocalCluster.start()`:
1. Pick free loopback ports (retried as a whole if a port was taken in between).
2. Write the static token file (admin in `system:masters`) and a service-account RSA key pair.
3. Start etcd (no fsync: test data is disposable) and wait for its /health.
4. Start kube-apiserver: secure port on 127.0.0.1, self-signed serving cert in the cert dir,
   `--authorization-mode=RBAC`, ServiceAccount admission off, service-account issuer and keys.
5. Wait for `/readyz` (RBAC bootstrap included), write the kubeconfig.
6. Install the Kueue CRDs and wait until every one is Established.

Identities for RBAC tests: `service_account_client()` asks the TokenRequest API for a real bearer
token of `system:serviceaccount:<ns>:<name>`; `api_client(impersonate=...)` sends impersonation
headers (the admin, in `system:masters`, may impersonate anyone).
"""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
import yaml

from tools.k8s_testenv import processes
from tools.k8s_testenv.errors import K8sTestEnvError
from tools.k8s_testenv.versions import Layout

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

ADMIN_USER = "gpuledger-testenv-admin"
ADMIN_GROUP = "system:masters"
START_ATTEMPTS = 3


@dataclass
class Endpoints:
    """Loopback ports of one cluster."""

    etcd_client: int
    etcd_peer: int
    apiserver: int


@dataclass
class LocalCluster:
    """One etcd + kube-apiserver pair under `workdir`; use as a context manager or start()/stop().

    `die_with_parent` (default) ties the servers to this Python thread's life; the manual CLI
    turns it off so that `up` can return while the servers keep running.
    """

    layout: Layout
    workdir: Path
    die_with_parent: bool = True
    ready_timeout_s: float = 120.0
    install_crds: bool = True
    admin_token: str = field(default_factory=lambda: secrets.token_hex(24))
    endpoints: Endpoints | None = None
    start_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    _etcd: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _apiserver: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    # --- public surface -----------------------------------------------------------------

    @property
    def server(self) -> str:
        """The API URL, e.g. `https://127.0.0.1:40123`."""
        if self.endpoints is None:
            raise K8sTestEnvError("k8s-testenv: the cluster is not started (no API URL yet)")
        return f"https://127.0.0.1:{self.endpoints.apiserver}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The serving certificate the apiserver generated (leaf + its self-signed CA)."""
        return self.workdir / "certs" / "apiserver.crt"

    @property
    def etcd_log(self) -> Path:
        return self.workdir / "etcd.log"

    @property
    def apiserver_log(self) -> Path:
        return self.workdir / "kube-apiserver.log"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in (self._etcd, self._apiserver) if p is not None]

    def api_client(
        self, token: str | None = None, *, impersonate: str | None = None, group: str | None = None
    ) -> ApiClient:
        """A `kubernetes.client.ApiClient`: admin by default, another bearer token, or impersonation.

        Impersonation sends `Impersonate-User` (and one `Impersonate-Group`): the Python client
        keeps headers in a dict, so only one group can be impersonated per client.
        """
        from kubernetes import client

        config = client.Configuration()
        config.host = self.server
        config.ssl_ca_cert = str(self.ca_file)
        config.verify_ssl = True
        config.api_key = {"authorization": token or self.admin_token}
        config.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(config)
        if impersonate:
            api.set_default_header("Impersonate-User", impersonate)
            if group:
                api.set_default_header("Impersonate-Group", group)
        return api

    def service_account_token(self, namespace: str, name: str, *, create: bool = True,
                              expiration_s: int = 3600) -> str:
        """A real token for `system:serviceaccount:<namespace>:<name>` from the TokenRequest API."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        with self.api_client() as api:
            core = client.CoreV1Api(api)
            if create:
                _create_ok(lambda: core.create_namespace(
                    client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))))
                _create_ok(lambda: core.create_namespaced_service_account(
                    namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))))
            body = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(expiration_seconds=expiration_s))
            try:
                answer = core.create_namespaced_service_account_token(name, namespace, body)
            except ApiException as exc:
                raise K8sTestEnvError(
                    f"k8s-testenv: TokenRequest for serviceaccount {namespace}/{name} failed: "
                    f"HTTP {exc.status} {exc.reason}"
                ) from None
            if answer.status is None or not answer.status.token:
                raise K8sTestEnvError(f"k8s-testenv: TokenRequest for {namespace}/{name} returned no token")
            return str(answer.status.token)

    def service_account_client(self, namespace: str, name: str, *, create: bool = True) -> ApiClient:
        """An ApiClient acting as the ServiceAccount (real token, so RBAC applies as in production)."""
        return self.api_client(self.service_account_token(namespace, name, create=create))

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        started = time.monotonic()
        for exe in (self.layout.apiserver, self.layout.etcd_binary):
            if not exe.is_file():
                raise K8sTestEnvError(
                    f"k8s-testenv: {exe} is missing; run `python -m tools.k8s_testenv build` first"
                )
        self.workdir.mkdir(parents=True, exist_ok=True)
        last: K8sTestEnvError | None = None
        # 1. Ports can be taken between probing and binding: retry the whole start.
        for _attempt in range(START_ATTEMPTS):
            try:
                self._start_once()
                break
            except K8sTestEnvError as exc:
                last = exc
                self.stop()
        else:
            assert last is not None
            raise last
        # 6. Kueue CRDs.
        if self.install_crds:
            from tools.k8s_testenv.crds import install_crds

            t = time.monotonic()
            with self.api_client() as api:
                install_crds(api, self.layout.crds)
            self.timings["crds_s"] = round(time.monotonic() - t, 2)
        self.start_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop the apiserver first (it holds etcd connections), then etcd; idempotent."""
        for attr in ("_apiserver", "_etcd"):
            proc = getattr(self, attr)
            if proc is not None:
                processes.stop(proc)
                setattr(self, attr, None)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        """What `status` prints and the pid file stores."""
        return {
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "admin_token": self.admin_token,
            "ca_file": str(self.ca_file),
            "pids": self.pids,
            "workdir": str(self.workdir),
            "kubernetes": self.layout.kubernetes,
        }

    # --- steps -----------------------------------------------------------------------------

    def _start_once(self) -> None:
        etcd_client, etcd_peer, api_port = free_ports(3)
        self.endpoints = Endpoints(etcd_client, etcd_peer, api_port)
        certs = self.workdir / "certs"
        # A fresh cert dir each attempt: the apiserver names its self-signed cert after the port.
        shutil.rmtree(certs, ignore_errors=True)
        certs.mkdir(parents=True)
        # 2. Credentials.
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"\n')
        tokens.chmod(0o600)
        t = time.monotonic()
        sa_key, sa_pub = _service_account_keys(self.layout.dir / "keys")
        self.timings["keys_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        # 3. etcd.
        data = self.workdir / "etcd-data"
        shutil.rmtree(data, ignore_errors=True)
        self._etcd = processes.spawn(
            [
                str(self.layout.etcd_binary),
                "--name=default",
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.etcd_log, die_with_parent=self.die_with_parent,
        )
        self._wait(f"http://127.0.0.1:{etcd_client}/health", self._etcd, self.etcd_log, verify=False,
                   headers={}, ok=lambda r: r.ok and r.json().get("health") == "true")
        self.timings["etcd_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        # 4. kube-apiserver.
        self._apiserver = processes.spawn(
            [
                str(self.layout.apiserver),
                f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                f"--cert-dir={certs}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                f"--token-auth-file={tokens}",
                f"--service-account-issuer=https://127.0.0.1:{api_port}/",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                "--endpoint-reconciler-type=none",
                "--v=1",
            ],
            self.apiserver_log, die_with_parent=self.die_with_parent,
        )
        # 5. Ready, then the kubeconfig.
        self._wait(f"{self.server}/readyz", self._apiserver, self.apiserver_log, verify=True,
                   headers={"Authorization": f"Bearer {self.admin_token}"}, ok=lambda r: r.status_code == 200)
        self.timings["apiserver_s"] = round(time.monotonic() - t, 2)
        self._write_kubeconfig()

    def _wait(self, url: str, proc: subprocess.Popen[bytes], log: Path, *, verify: bool,
              headers: dict[str, str], ok: Any) -> None:
        """Poll `url` until `ok(response)`, failing fast if the process exits."""
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise K8sTestEnvError(
                    f"k8s-testenv: {log.stem} exited with {proc.returncode} while starting: "
                    f"{log_tail(log)} (log: {log})"
                )
            # The CA file exists only once the apiserver wrote its self-signed cert.
            if verify and not self.ca_file.is_file():
                time.sleep(0.1)
                continue
            try:
                answer = requests.get(url, headers=headers, timeout=2,
                                      verify=str(self.ca_file) if verify else False)
                if ok(answer):
                    return
                last = f"HTTP {answer.status_code}"
            except (requests.RequestException, ValueError) as exc:
                last = type(exc).__name__
            time.sleep(0.2)
        raise K8sTestEnvError(
            f"k8s-testenv: {url} not ready after {self.ready_timeout_s:.0f}s ({last}); log: {log}"
        )

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testenv", "cluster": {
                "server": self.server, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": ADMIN_USER, "user": {"token": self.admin_token}}],
            "contexts": [{"name": "testenv", "context": {"cluster": "testenv", "user": ADMIN_USER}}],
            "current-context": "testenv",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)


def _create_ok(call: Any) -> None:
    """Run a create call, accepting 409 AlreadyExists."""
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        if exc.status != 409:
            raise


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports, by binding port 0 (all held open until all are chosen)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _service_account_keys(folder: Path) -> tuple[Path, Path]:
    """The RSA key pair that signs service-account tokens, made once by openssl and then reused.

    Kept beside the cached binaries: test clusters are disposable, so one key per machine is
    enough, and generating a key costs seconds on a busy 2-core machine. Written to a temporary
    folder and renamed, so concurrent first starts never see half a key pair.
    """
    key, pub = folder / "sa.key", folder / "sa.pub"
    if key.is_file() and pub.is_file():
        return key, pub
    openssl = shutil.which("openssl")
    if openssl is None:
        raise K8sTestEnvError("k8s-testenv: `openssl` is needed to make the service-account signing key")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".keys-", dir=folder.parent))
    for argv in ([openssl, "genrsa", "-out", str(tmp / key.name), "2048"],
                 [openssl, "rsa", "-in", str(tmp / key.name), "-pubout", "-out", str(tmp / pub.name)]):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise K8sTestEnvError(f"k8s-testenv: `{' '.join(argv)}` failed: {proc.stderr.strip()}")
    (tmp / key.name).chmod(0o600)
    try:
        tmp.rename(folder)
    except OSError:  # another process won the race: use its keys
        shutil.rmtree(tmp, ignore_errors=True)
    return key, pub


def log_tail(log: Path, lines: int = 4) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line.strip()[:300] for line in text.strip().splitlines()[-lines:]]
    return " | ".join(kept) or "(empty log)"


def save_state(cluster: LocalCluster, path: Path) -> None:
    """The CLI's pid/state file: enough for `status` and `down` from another process."""
    path.write_text(json.dumps(cluster.describe(), indent=2) + "\n")
