"""The e2e tier: a real kube-apiserver + etcd (+ kube-scheduler), gangcheck registered through real
Validating/MutatingWebhookConfigurations, driven with kubectl.

Where the cluster comes from (session fixture ``cluster``):

* ``GANGCHECK_E2E_USE_KUBECONFIG=1`` and ``KUBECONFIG`` set: that cluster (e.g. ``kind create
  cluster``); the API server must reach the webhook at ``GANGCHECK_E2E_WEBHOOK_HOST`` (default
  127.0.0.1; a DNS name, it goes into the serving certificate). Scenarios that restart the API
  server are skipped there.
* otherwise: etcd + kube-apiserver started here from the binaries ``make controlplane`` builds
  (``e2e/build.sh``, cached in ``~/.cache/gangcheck/<version>/bin``).

When neither is possible every e2e test is skipped with the reason, and the end of the run says
so in a banner. ``GANGCHECK_REQUIRE_E2E=1`` turns that skip into a failure (CI).
``GANGCHECK_E2E_KEEP=1`` keeps the temporary directory (logs, kubeconfig) for a look afterwards.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import e2e_controlplane as cp  # noqa: E402
from e2e_objects import SYSTEM_NS  # noqa: E402
from e2e_harness import SKIP_KEY, Cluster, Gangcheck, truthy, unavailable  # noqa: E402,F401

REPO = cp.REPO
CRDS = HERE / "crds"


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: end-to-end test against a real kube-apiserver (tests/e2e)")
    config.addinivalue_line("markers", "local_only: needs the control plane started by the suite (restarts it)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in cp.SUMMARY:  # referee results (e.g. "referee karpenter: ...")
        terminalreporter.write_line(line, bold=True)
    reason = config.stash.get(SKIP_KEY, None)
    if not reason:
        return
    tr = terminalreporter
    bar = "!" * 78
    tr.write_line(bar, yellow=True, bold=True)
    tr.write_line("E2E TIER SKIPPED: no real control plane was available, so the webhook was NOT", yellow=True, bold=True)
    tr.write_line("tested against a real kube-apiserver in this run.", yellow=True, bold=True)
    tr.write_line(f"why: {reason}", yellow=True, bold=True)
    tr.write_line("fix: install Go and run `make controlplane` (or `make e2e`), or set", yellow=True)
    tr.write_line("     KUBECONFIG=... GANGCHECK_E2E_USE_KUBECONFIG=1; GANGCHECK_REQUIRE_E2E=1 makes this fatal.", yellow=True)
    tr.write_line(bar, yellow=True, bold=True)


# ---------------------------------------------------------------- the cluster


def _kubectl_path(bindir: Path) -> str | None:
    p = bindir / "kubectl"
    if os.access(p, os.X_OK):
        return str(p)
    return shutil.which("kubectl")


@pytest.fixture(scope="session")
def cluster(request):
    config = request.config
    started: list = []

    def cleanup():
        for x in reversed(started):
            try:
                x()
            except Exception:
                pass
        started.clear()

    atexit.register(cleanup)  # also when pytest is interrupted hard
    try:
        bindir = cp.bin_dir()
        if truthy("GANGCHECK_E2E_USE_KUBECONFIG") and os.environ.get("KUBECONFIG"):
            kubectl = _kubectl_path(bindir)
            if kubectl is None:
                unavailable(config, "GANGCHECK_E2E_USE_KUBECONFIG=1 but no kubectl (build it with `make controlplane` or put one on PATH)")
            kubeconfig = Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
            workdir = Path(tempfile.mkdtemp(prefix="gangcheck-e2e-ext-"))
            if not truthy("GANGCHECK_E2E_KEEP"):
                started.append(lambda: shutil.rmtree(workdir, ignore_errors=True))
            kube = cp.Kube(kubectl, kubeconfig)
            r = kube.run("get", "--raw", "/readyz", check=False)
            if r.code != 0:
                unavailable(config, f"KUBECONFIG={kubeconfig}: cluster not reachable: {r.stderr.strip()[:200]}")
            c = Cluster(kube, kubeconfig, None, workdir)
        else:
            missing = cp.missing_binaries(bindir)
            if missing:
                why = "" if shutil.which("go") else "; `go` is not on PATH, so they cannot be built here"
                unavailable(config, f"control-plane binaries missing from {bindir}: {', '.join(missing)}"
                                     f" (run `make controlplane`){why}")
            plane = cp.ControlPlane(bindir)
            started.append(plane.stop)
            print(f"\n[e2e] starting etcd + kube-apiserver {cp.k8s_version()} in {plane.dir}", file=sys.stderr)
            plane.start()
            print(f"[e2e] control plane ready in {plane.startup_seconds:.1f}s at {plane.server}", file=sys.stderr)
            c = Cluster(cp.Kube(str(bindir / "kubectl"), plane.kubeconfig), plane.kubeconfig, plane, plane.dir)
        _install_crds(c.kube, config)
        c.ensure_namespace(SYSTEM_NS)
        yield c
    finally:
        cleanup()


def _install_crds(kube: cp.Kube, config) -> None:
    """The CRDs of the kinds the tier uses: Kueue's own (from the module e2e/build-kueue.sh
    downloads; server-side, the Workload CRD is too large for a client-side apply), and
    permissive stand-ins in tests/e2e/crds for the other kinds."""
    import e2e_kueue

    kueue_crds = e2e_kueue.crds_dir()
    if not sorted(kueue_crds.glob("*.yaml")):
        unavailable(config, f"Kueue's CRDs missing from {kueue_crds} (run `make controlplane`: e2e/build-kueue.sh)")
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(kueue_crds), timeout=120)
    kube.run("apply", "-f", str(CRDS))
    # a CRD created a moment ago may have no status yet (kubectl wait then fails at once): retry
    cp.wait_for(lambda: kube.run("wait", "--for=condition=Established", "--timeout=30s", "-f", str(CRDS), "-f", str(kueue_crds),
                                 check=False).code == 0, 90, "the CRDs Established")
    # discovery of the new groups: kubectl caches it; make sure every kind resolves
    cp.wait_for(lambda: kube.run("get", "clusterqueues.kueue.x-k8s.io,pytorchjobs.kubeflow.org,rayjobs.ray.io", "-A",
                                 check=False).code == 0, 30, "CRDs served")


# ---------------------------------------------------------------- gangcheck


@pytest.fixture(scope="session")
def gangcheck(cluster):
    g = Gangcheck(cluster)
    g.start()
    g.register()
    try:
        yield g
    finally:
        try:
            cluster.kube.delete("validatingwebhookconfiguration,mutatingwebhookconfiguration", "gangcheck")
        except Exception:
            pass
        g.stop()


@pytest.fixture(scope="session")
def kube(cluster) -> cp.Kube:
    return cluster.kube
