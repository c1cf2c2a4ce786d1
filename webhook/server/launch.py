"""``gangcheck serve``: the process around the app: logging, the snapshot source, the policy
reloader, the TLS server (:func:`serve`), and :func:`make_source` (``demo`` / a dump / ``live``).

Owns process setup and teardown only; the app is ``app.create_app``, the TLS loop
``runner.WebhookServer``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..policy_reload import PolicyReloader
from ..sources import SnapshotSource, StaticSource
from .app import create_app
from .runner import WebhookServer

__all__ = ["serve", "make_source"]

log = logging.getLogger("gangcheck.server")


def make_source(cluster: str, *, on_policy: Callable[[dict | None], None] | None = None,
                policy_configmap: tuple[str, str] = ("gangcheck-system", "gangcheck-policy")) -> SnapshotSource:
    """``demo`` or a dump path → ``StaticSource``; ``live`` → ``webhook.cache.LiveCache`` (in-cluster
    config or KUBECONFIG; started and stopped by the app's lifespan).

    With ``on_policy`` (live only), the cache also watches the ConfigMap ``policy_configmap``
    (namespace, name) and calls ``on_policy(data)`` with its ``data`` (None when deleted).

    Raises:
        DumpError / AdapterError: the dump cannot be read.
    """
    if cluster == "live":
        from ..cache import LiveCache

        if on_policy is not None:
            return LiveCache(policy_configmap=policy_configmap, on_policy=on_policy)
        return LiveCache()
    from ..dump import load_cluster

    return StaticSource(load_cluster(cluster), name=cluster)


def serve(cluster: str = "demo", policy_path: str | None = None, host: str = "127.0.0.1", port: int = 8443,
          cert: str = "certs/tls.crt", key: str = "certs/tls.key", *, source: SnapshotSource | None = None,
          policy_poll_interval: float = 2.0, cert_poll_interval: float = 2.0, log_level: str = "info") -> int:
    """``gangcheck serve``: run the webhook over TLS until SIGINT/SIGTERM; returns an exit code.

    Args:
        cluster: ``demo``, a dump file/directory, or ``live`` (ignored when ``source`` is given).
        policy_path: policy YAML polled for changes. None → the default policy, and with
            ``cluster="live"`` the ConfigMap gangcheck-policy (key policy.yaml) in
            gangcheck-system, watched by the cache, applied live.
        host, port: where to listen.
        cert, key: PEM serving certificate and key (``gangcheck certs`` writes them); reloaded
            live when the files change.
        source: a ready-made ``SnapshotSource`` (e.g. a live cache built by the CLI).

    Raises:
        PolicyError: never (an invalid initial policy makes /readyz 503 and admission fail open).
        FileNotFoundError: ``cert`` or ``key`` missing (the message says to run ``gangcheck certs``).
    """
    for f in (cert, key):
        if not Path(f).is_file():
            raise FileNotFoundError(f"{f}: no such file; create certificates with `gangcheck certs --out {Path(f).parent}`")
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from ..decision_log import configure as log_decisions_to

    log_decisions_to(None)  # one JSON line per decision on stdout; everything else on stderr
    reloader = PolicyReloader(policy_path, interval=policy_poll_interval)
    if source is not None:
        src = source
    elif cluster == "live" and policy_path is None:
        src = make_source(cluster, on_policy=lambda data: reloader.update_text((data or {}).get("policy.yaml")))
    else:
        src = make_source(cluster)
    if reloader.error:
        log.error("policy: %s", reloader.error)
    reloader.start()
    app = create_app(src, reloader)
    log.info("gangcheck webhook on https://%s:%d (cluster %s, policy %s)", host, port, cluster, policy_path or "default")
    try:
        WebhookServer(app, host, port, cert, key, cert_poll_interval=cert_poll_interval, log_level="warning").run()
    finally:
        reloader.stop()
    return 0
