"""The real-node tier (#12): gangcheck deployed as users deploy it, on a real node of this machine.

Fixtures (session scope; tests/node/README-harness.md lists the helpers too):

* ``node`` — ``node_cluster.NodeCluster`` started: etcd, kube-apiserver, kube-scheduler,
  kube-controller-manager, containerd + runc + CNI bridge, kube-proxy and a kubelet whose node
  ``gangcheck-node`` is Ready. Attributes: ``kube`` (``cp.Kube``, admin kubectl), ``ctr`` (argv
  prefix for ``ctr -n k8s.io`` on the node's containerd), ``dir``, ``tails()`` (last lines of
  every component's log), ``node_ready_seconds``, ``import_image(archive)``.
* ``image`` — (reference, archive) from image/build.sh, run exactly as tests/image does.
* ``deployed`` — a ``Deployed``: the image imported into the node, then the README's
  "Deploying" shell block run as written by bash (``kubectl apply -k`` — of an overlay of
  manifests/ that changes only the image reference —, ``gangcheck certs``, the Secret
  gangcheck-tls, the caBundle patch, ``rollout status``), both replicas Ready. Attributes: ``kube``,
  ``node``, ``overlay`` (its directory), ``ca_bundle``, ``certs`` (the ``gangcheck certs`` dir),
  ``ready_seconds`` (apply → both replicas Ready), ``pods()``.
* ``workload_ns`` — a namespace for gangs (not exempt from the webhook), emptied after each test.

The whole tier holds an exclusive lock on /tmp/gangcheck-node.lock (``flock`` takes the same one),
so two runs on one machine never overlap. Teardown stops everything, puts the host back
(node_host.HostState) and FAILS (an error in the last test's teardown) if anything is left:
mounts, netns, links, cgroups, iptables rules, sysctls, directories.

It runs as root with containerd, runc, iptables and containernetworking-plugins installed (Debian:
``apt-get install containerd runc containernetworking-plugins umoci mmdebstrap``) and Go to build
kubelet/kube-controller-manager/kube-proxy (cached by e2e/build.sh). Otherwise every test is
skipped with the reason and a banner says so at the end; ``GANGCHECK_REQUIRE_NODE=1`` turns the
skip into a failure, ``GANGCHECK_SKIP_NODE=1`` skips on purpose (said in the banner too).
``GANGCHECK_NODE_KEEP=1`` keeps the tier's directory (logs) afterwards.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

sys.path.insert(0, str(HERE.parent / "image"))

import node_cluster as nc  # noqa: E402
from image_tier import _truthy, skip_banner  # noqa: E402  (the image tier's banner and env flags)
from node_cluster import SYSTEM_NS, cp  # noqa: E402

ROOT = nc.REPO
SKIP_KEY = pytest.StashKey[str]()
#: The end-of-run banner when the tier was skipped: (text, bold).
BANNER = [("REAL-NODE TIER SKIPPED: gangcheck was NOT deployed on a real node in this run.", True),
          ("why: {reason}", True),
          ("fix: as root, apt-get install containerd runc containernetworking-plugins umoci", False),
          ("     mmdebstrap iptables, Go on PATH; GANGCHECK_REQUIRE_NODE=1 makes this fatal.", False)]
#: Lines the scenarios add for the end of the run (figures): printed in the terminal summary.
SUMMARY: list[str] = []


def pytest_configure(config):
    config.addinivalue_line("markers", "node: real-node tier (tests/node; root, containerd, a kubelet)")


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if HERE in Path(str(i.fspath)).resolve().parents]
    for item in mine:
        item.add_marker(pytest.mark.node)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed real-node test's report ends with the last lines of every component's log."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and nc.RUNNING and HERE in Path(str(item.fspath)).resolve().parents:
        rep.sections.append(("real-node component logs (last 25 lines each)", nc.RUNNING[0].tails(25)))


def unavailable(config, reason: str):
    if _truthy("GANGCHECK_REQUIRE_NODE") and not _truthy("GANGCHECK_SKIP_NODE"):
        pytest.fail(f"real-node tier required (GANGCHECK_REQUIRE_NODE=1) but unavailable: {reason}", pytrace=False)
    config.stash[SKIP_KEY] = reason
    pytest.skip(f"real-node tier skipped: {reason}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in SUMMARY:
        terminalreporter.write_line(line, bold=True)
    reason = config.stash.get(SKIP_KEY, None)
    if reason:
        skip_banner(terminalreporter, [(text.format(reason=reason), bold) for text, bold in BANNER])


# ---------------------------------------------------------------- the node


@pytest.fixture(scope="session")
def node(request):
    config = request.config
    if _truthy("GANGCHECK_SKIP_NODE"):
        unavailable(config, "GANGCHECK_SKIP_NODE=1")
    reason = nc.missing()
    if reason:
        unavailable(config, reason)
    lock = nc.TierLock()
    lock.acquire()
    workdir = Path(tempfile.mkdtemp(prefix="gangcheck-node-"))
    cluster: nc.NodeCluster | None = None
    state = {"stopped": False}

    def stop() -> list[str]:
        if state["stopped"]:
            return []
        state["stopped"] = True
        left = cluster.stop() if cluster is not None else []
        if not _truthy("GANGCHECK_NODE_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)
        lock.release()
        return left

    atexit.register(stop)  # also when pytest is interrupted hard
    # SIGTERM (a `timeout`, a CI cancel) would end Python without atexit: turn it into an
    # interrupt so the host is put back
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    try:
        bindir = nc.build_binaries()
        pause = nc.build_pause()
        cluster = nc.NodeCluster(bindir, workdir, pause)
        print(f"\n[node] starting a real node in {workdir}", file=sys.stderr)
        try:
            cluster.start()
        except BaseException:
            sys.stderr.write(cluster.tails())
            raise
        print(f"[node] node {nc.NODE_NAME} Ready {cluster.node_ready_seconds:.1f}s after the kubelet started",
              file=sys.stderr)
        SUMMARY.append(f"real-node: node Ready {cluster.node_ready_seconds:.1f} s after kubelet start")
        nc.RUNNING.append(cluster)
        yield cluster
    finally:
        nc.RUNNING.clear()
        left = stop()
        signal.signal(signal.SIGTERM, previous)
        if cluster is not None and cluster.notes:
            print("[node] teardown: " + "; ".join(cluster.notes[:40]), file=sys.stderr)
    assert left == [], "the real-node tier left these behind on the host:\n" + "\n".join(left)


@pytest.fixture(scope="session")
def image(request, node, tmp_path_factory):
    """(reference, archive) from image/build.sh (tests/image/conftest.py's recipe)."""
    out = tmp_path_factory.mktemp("node-image")
    env = {**os.environ, "PY": sys.executable, "GANGCHECK_IMAGE_OUT": str(out)}
    p = subprocess.run(["bash", str(ROOT / "image" / "build.sh")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        why = p.stderr.strip().splitlines()[-1:] or ["?"]
        if "mmdebstrap" in why[0] or "umoci" in why[0]:
            unavailable(request.config, f"image/build.sh cannot run here: {why[0]}")
        raise AssertionError(f"image/build.sh failed ({p.returncode}):\n{p.stderr[-4000:]}")
    ref, archive = p.stdout.strip().splitlines()[-2:]
    return ref, Path(archive)


# ---------------------------------------------------------------- gangcheck, as users deploy it


@dataclass
class Deployed:
    kube: cp.Kube
    node: nc.NodeCluster
    overlay: Path
    certs: Path
    ca_bundle: str
    image_ref: str
    ready_seconds: float = 0.0
    applied: str = ""
    notes: list[str] = field(default_factory=list)

    def pods(self) -> list[dict]:
        return self.kube.get("pods", namespace=SYSTEM_NS, selector="app.kubernetes.io/name=gangcheck")["items"]

    def ready_pods(self) -> list[dict]:
        return [p for p in self.pods() if not p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))]


def write_overlay(d: Path, image_ref: str) -> Path:
    """A kustomize overlay of manifests/ whose only change is the image reference
    (``images:``), as the README's Deploying section shows users."""
    name, _, tag = image_ref.rpartition(":")
    d.mkdir(parents=True, exist_ok=True)
    (d / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(ROOT / 'manifests', d)}\n"
        f"images:\n  - name: gangcheck\n    newName: {name}\n    newTag: \"{tag}\"\n")
    return d


def readme_deploy_steps() -> str:
    """The README's "Deploying" shell block that applies the manifests and sets up the
    certificate without cert-manager (the first ```sh block after "The certificate, without
    cert-manager")."""
    text = (ROOT / "README.md").read_text()
    at = text.find("The certificate, without")
    assert at >= 0, "README.md: the Deploying section no longer says how to set up the certificate"
    start = text.index("```sh\n", at) + len("```sh\n")
    return text[start:text.index("```", start)]


@pytest.fixture(scope="session")
def deployed(node, image, tmp_path_factory):
    ref, archive = image
    node.import_image(archive)
    # the kubelet normalizes `gangcheck:0.1.0` to docker.io/library/gangcheck:0.1.0, the name
    # image/oci_archive.py gives the import; the overlay names it in full
    full = ref if "/" in ref.split(":")[0] else f"docker.io/library/{ref}"
    dep = deploy(node, full, tmp_path_factory.mktemp("deploy"))
    SUMMARY.append(f"real-node: both replicas Ready {dep.ready_seconds:.1f} s after kubectl apply -k")
    print(f"[node] gangcheck: both replicas Ready {dep.ready_seconds:.1f}s after apply", file=sys.stderr)
    return dep


def deploy(node: nc.NodeCluster, full: str, d: Path) -> Deployed:
    """The ``deployed`` fixture's steps: the README's "Deploying" shell block run by bash as
    written, on an overlay (``d/overlay``) of manifests/ naming the image ``full`` (already on the
    node); returns once both replicas are Ready. Also for a module that takes the deployment down
    and must put it back (test_node_helm.py). ``d``: a new, empty directory. AssertionError (with
    the pods' state and the components' logs) when a step fails."""
    kube = node.kube
    overlay = write_overlay(d / "overlay", full)
    certs = d / "certs"
    # README "Deploying": its shell block, run as written (on the overlay instead of manifests/)
    script = readme_deploy_steps().replace("kubectl apply -k manifests/", f"kubectl apply -k {overlay}")
    shim = d / "bin"
    shim.mkdir()
    (shim / "gangcheck").write_text(f'#!/bin/sh\nexec {sys.executable} -m webhook "$@"\n')
    (shim / "gangcheck").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}:{node.bindir}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(node.plane.kubeconfig), "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    try:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=d, env=env, capture_output=True,
                           text=True, timeout=420)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"README's deploy steps did not finish in 420 s:\n{_describe(kube)}\n{node.tails()}") from e
    if r.returncode != 0:
        raise AssertionError(f"README's deploy steps failed ({r.returncode}):\n{script}\n--- stdout\n{r.stdout}"
                             f"\n--- stderr\n{r.stderr}\n{_describe(kube)}\n{node.tails()}")
    applied = r
    ca_bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        got = [w["clientConfig"].get("caBundle") for w in kube.get(kind, "gangcheck")["webhooks"]]
        assert got == [ca_bundle] * len(got), f"{kind}: the README's steps left webhooks without the caBundle"
    dep = Deployed(kube, node, overlay, certs, ca_bundle, full, applied=applied.stdout)
    try:
        kube.run("rollout", "status", "-n", SYSTEM_NS, "deployment/gangcheck", "--timeout=300s", timeout=330)
        cp.wait_for(lambda: len(dep.ready_pods()) == 2, 120, "both gangcheck replicas Ready", 0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_describe(kube)}\n{node.tails()}") from None
    dep.ready_seconds = time.monotonic() - t0
    return dep


def _describe(kube: cp.Kube) -> str:
    out = []
    for args in (("get", "pods", "-A", "-o", "wide"), ("describe", "pods", "-n", SYSTEM_NS),
                 ("get", "events", "-A", "--sort-by=.lastTimestamp"),
                 ("logs", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/name=gangcheck", "--tail=30", "--all-containers")):
        r = kube.run(*args, check=False, timeout=60)
        out.append(f"$ kubectl {' '.join(args)}\n{r.stdout[-4000:]}{r.stderr[-1000:]}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def workload_ns(deployed):
    """A namespace the webhook checks (not exempt); its Jobs and Pods are deleted after the module."""
    kube = deployed.kube
    name = "gangs"
    if not kube.exists("namespace", name):
        kube.apply(cp.namespace_obj(name))
    yield name
    kube.run("delete", "jobs,pods", "--all", "-n", name, "--grace-period=1", "--wait=true", check=False, timeout=120)
