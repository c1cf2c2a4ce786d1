"""The real helm for tests: find the binary e2e/build-helm.sh builds, render charts/gangcheck,
install it into a cluster, and compare its objects with the kustomize base.

Binaries (nothing here builds them; ``make controlplane`` / ``bash e2e/build-helm.sh`` does):

* helm: ``${GANGCHECK_CACHE:-~/.cache/gangcheck}/helm-<version>/bin/helm``, the version being the
  one ``e2e/helm/go.mod`` requires of helm.sh/helm/v3 (``GANGCHECK_HELM`` overrides the path);
* kubectl: the control plane's (``e2e_controlplane.bin_dir()``), for ``kubectl kustomize``.

Helm runs with its own empty config/cache/data directories (a temporary directory), so it never
reads or writes the user's ~/.config/helm or repositories.

Use from another tier (e.g. the node tier)::

    import helm_tool
    helm_tool.install(kubeconfig, "gangcheck-system", {"image": {"repository": "gangcheck"}})
    ...
    helm_tool.uninstall(kubeconfig, "gangcheck-system")

Errors: a helm or kubectl failure raises :class:`ToolError` carrying the command and its stderr.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "e2e"))

import e2e_controlplane as cp  # noqa: E402  (cache_root, bin_dir, required_version)

REPO = cp.REPO
CHART = REPO / "charts" / "gangcheck"
BASE = REPO / "manifests" / "base"
RELEASE = "gangcheck"
NAMESPACE = "gangcheck-system"

#: Labels Helm's chart puts on every object's metadata that the kustomize base does not
#: (the chart's standard labels; every label of the base is there too, with the same value).
HELM_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version",
               "helm.sh/chart")

#: The documented differences between `helm template` (default values) and `kubectl kustomize
#: manifests/base`; :func:`differences` allows these and nothing else.
KNOWN_DIFFERENCES = (
    "metadata.labels: the chart adds exactly HELM_LABELS (instance, managed-by, version, helm.sh/chart)",
    "Namespace gangcheck-system: only the base creates it; Helm installs into the release namespace "
    "(--create-namespace), the chart renders it only with namespace.create=true",
    "Secret gangcheck-tls: only the chart has it (certificates.mode=selfSigned generates it; the base "
    "expects it to exist)",
    "webhooks[*].clientConfig.caBundle: only the chart sets it (the CA of that Secret)",
    "ConfigMap gangcheck-policy data['policy.yaml']: compared as parsed YAML (toYaml drops the comments "
    "and sorts the keys)",
)


class ToolError(RuntimeError):
    """A helm/kubectl command failed: ``argv``, ``code``, ``stderr``."""

    def __init__(self, argv: list[str], code: int, stderr: str) -> None:
        self.argv, self.code, self.stderr = argv, code, stderr
        super().__init__(f"{' '.join(argv[:3])} ... exited {code}:\n{stderr.strip()}")


# ---------------------------------------------------------------- binaries


def helm_version() -> str:
    """The helm version e2e/helm/go.mod pins (e.g. ``v3.22.0``)."""
    return cp.required_version("e2e/helm/go.mod", "helm.sh/helm/v3")


def helm_path() -> Path:
    """Where e2e/build-helm.sh puts helm (``GANGCHECK_HELM`` overrides)."""
    if os.environ.get("GANGCHECK_HELM"):
        return Path(os.environ["GANGCHECK_HELM"])
    return cp.cache_root() / f"helm-{helm_version()}" / "bin" / "helm"


def kubectl_path() -> Path:
    return cp.bin_dir() / "kubectl"


def helm_binary() -> str:
    """The built helm's path; ToolError when it is missing (see :func:`missing`)."""
    p = helm_path()
    if not os.access(p, os.X_OK):
        raise ToolError([str(p)], 127, missing() or "helm missing")
    return str(p)


def missing() -> str | None:
    """Why helm or kubectl cannot run here (with the fix), or None when both are built."""
    absent = [f"{name} ({p})" for name, p in (("helm", helm_path()), ("kubectl", kubectl_path()))
              if not os.access(p, os.X_OK)]
    if not absent:
        return None
    why = "" if shutil.which("go") else "; `go` is not on PATH, so they cannot be built here"
    return (f"not built: {', '.join(absent)} — run `make controlplane` (e2e/build.sh, which runs "
            f"e2e/build-helm.sh){why}")


# ---------------------------------------------------------------- running


def _run(argv: list[str], *, env: dict | None = None, timeout: float = 120, stdin: str | None = None) -> str:
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise ToolError(argv, p.returncode, p.stderr)
    return p.stdout


def helm(*args: str, kubeconfig: Path | str | None = None, timeout: float = 300) -> str:
    """Run the built helm with private config/cache/data directories; returns stdout."""
    with tempfile.TemporaryDirectory(prefix="gangcheck-helm-") as home:
        env = {f"HELM_{k}_HOME": os.path.join(home, k.lower()) for k in ("CACHE", "CONFIG", "DATA")}
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        return _run([helm_binary(), *args], env=env, timeout=timeout)


def _values_args(values: dict | None, tmp: str) -> list[str]:
    if not values:
        return []
    f = os.path.join(tmp, "values.yaml")
    Path(f).write_text(yaml.safe_dump(values))
    return ["-f", f]


def render_text(values: dict | None = None, *, release: str = RELEASE, namespace: str = NAMESPACE,
                chart: Path = CHART) -> str:
    """``helm template RELEASE CHART --namespace NAMESPACE [-f values]``: the manifest text."""
    with tempfile.TemporaryDirectory(prefix="gangcheck-values-") as tmp:
        return helm("template", release, str(chart), "--namespace", namespace, *_values_args(values, tmp))


def render(values: dict | None = None, **kw: Any) -> list[dict]:
    """:func:`render_text`, parsed: the list of objects."""
    return parse(render_text(values, **kw))


def parse(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize(path: Path = BASE) -> list[dict]:
    """``kubectl kustomize PATH`` with the control plane's kubectl, parsed."""
    if not os.access(kubectl_path(), os.X_OK):
        raise ToolError([str(kubectl_path())], 127, missing() or "kubectl missing")
    return parse(_run([str(kubectl_path()), "kustomize", str(path)]))


def install(kubeconfig: Path | str, namespace: str = NAMESPACE, values: dict | None = None, *,
            release: str = RELEASE, wait: bool = False, timeout_s: int = 300,
            create_namespace: bool = True) -> str:
    """``helm upgrade --install`` the chart into the cluster of ``kubeconfig`` (idempotent: a
    second call upgrades). ``wait``: until the Deployment's pods are Ready (needs a node).
    Returns helm's output."""
    with tempfile.TemporaryDirectory(prefix="gangcheck-values-") as tmp:
        args = ["upgrade", "--install", release, str(CHART), "--namespace", namespace,
                *(["--create-namespace"] if create_namespace else []), *_values_args(values, tmp)]
        if wait:
            args += ["--wait", f"--timeout={timeout_s}s"]
        return helm(*args, kubeconfig=kubeconfig, timeout=timeout_s + 60)


def uninstall(kubeconfig: Path | str, namespace: str = NAMESPACE, *, release: str = RELEASE,
              timeout_s: int = 120) -> str:
    """``helm uninstall`` (waits for the objects to be deleted); the namespace is left."""
    return helm("uninstall", release, "--namespace", namespace, "--wait", f"--timeout={timeout_s}s",
                kubeconfig=kubeconfig, timeout=timeout_s + 60)


# ---------------------------------------------------------------- comparing


def key(obj: dict) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace or "", name) of an object."""
    md = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), md.get("namespace") or "", md.get("name", "")


def index(objs: list[dict]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for o in objs:
        k = key(o)
        if k in out:
            raise ValueError(f"duplicate object {k}")
        out[k] = o
    return out


def _diff(a: Any, b: Any, path: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}"
            if k not in a:
                yield f"{p}: only in the chart ({b[k]!r})"
            elif k not in b:
                yield f"{p}: only in the base ({a[k]!r})"
            else:
                yield from _diff(a[k], b[k], p)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} items in the base, {len(b)} in the chart"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _diff(x, y, f"{path}[{i}]")
    elif a != b or type(a) is not type(b):
        yield f"{path}: base {a!r} != chart {b!r}"


def _normalize_chart(obj: dict) -> tuple[dict, list[str]]:
    """A copy of a chart object with the known differences taken out, and the problems found in
    them (a missing Helm label, an empty caBundle)."""
    o = yaml.safe_load(yaml.safe_dump(obj))
    problems = []
    labels = (o.get("metadata") or {}).get("labels") or {}
    for k in HELM_LABELS:
        if k not in labels:
            problems.append(f"metadata.labels: Helm label {k} missing")
        labels.pop(k, None)
    for wh in o.get("webhooks") or []:
        ca = (wh.get("clientConfig") or {}).pop("caBundle", None)
        if ca is not None:
            try:
                pem = base64.b64decode(ca, validate=True)
            except ValueError:
                pem = b""
            if b"BEGIN CERTIFICATE" not in pem:
                problems.append(f"webhooks[{wh.get('name')}].clientConfig.caBundle is not a base64 PEM certificate")
    return o, problems


def _parse_policy(obj: dict) -> dict:
    o = yaml.safe_load(yaml.safe_dump(obj))
    if o.get("kind") == "ConfigMap" and "policy.yaml" in (o.get("data") or {}):
        o["data"]["policy.yaml"] = yaml.safe_load(o["data"]["policy.yaml"])
    return o


def differences(base: list[dict], chart: list[dict], *, tls_secret: str = "gangcheck-tls") -> list[str]:
    """Every difference between the kustomize base's objects and the chart's, except the
    KNOWN_DIFFERENCES (the base's Namespace, the chart's Secret ``tls_secret``, Helm's labels, the
    caBundle, the policy's formatting). Empty when the chart renders the same objects."""
    b, c = index(base), index(chart)
    out = []
    for k in sorted(set(b) | set(c)):
        api, kind, ns, name = k
        where = f"{kind} {ns + '/' if ns else ''}{name}"
        if k not in c:
            if kind != "Namespace":
                out.append(f"{where}: only in the base")
            continue
        if k not in b:
            if not (kind == "Secret" and name == tls_secret):
                out.append(f"{where}: only in the chart")
            continue
        normal, problems = _normalize_chart(c[k])
        out += [f"{where}: {p}" for p in problems]
        out += [f"{where}: {d}" for d in _diff(_parse_policy(b[k]), _parse_policy(normal), "")]
    return out
