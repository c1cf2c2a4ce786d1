"""Generate AdmissionReview requests (admission.k8s.io/v1) for the example jobs in examples/*.yaml.

    python examples/admission/make_reviews.py            # writes examples/admission/<name>.json
    python examples/admission/make_reviews.py --check    # also prints each verdict on the demo cluster

Each supported object becomes ``<file stem>.json`` (``<file stem>-<n>.json`` when a file holds
several), shaped like what the API server POSTs to /validate and /mutate for a ``kubectl create``:
``request.uid`` is a UUID derived from the file name (stable across runs), ``operation`` CREATE,
``kind``/``resource`` from the object's apiVersion/kind, ``userInfo`` a fixed example user.
Post one to a local server (``make run``):

    curl -sS --cacert certs/ca.crt -H 'Content-Type: application/json' \\
         --data @examples/admission/pytorchjob-80x8.json https://127.0.0.1:8443/validate
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent

#: kind → resource (plural) as the API server names it in request.resource.
PLURALS = {
    "Job": "jobs", "JobSet": "jobsets", "PyTorchJob": "pytorchjobs", "MPIJob": "mpijobs", "TrainJob": "trainjobs",
    "LeaderWorkerSet": "leaderworkersets", "RayJob": "rayjobs", "RayCluster": "rayclusters", "Pod": "pods",
    "PodGroup": "podgroups",
}
NAMESPACE = uuid.UUID("6f1c1d0e-9a53-4b8e-8f5e-6a7c2b1d0e42")


def review_for(obj: dict, uid: str) -> dict:
    """An AdmissionReview v1 request for creating ``obj`` (dict); ``uid`` becomes request.uid."""
    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    kind = obj.get("kind", "")
    meta = obj.get("metadata") or {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": PLURALS.get(kind, kind.lower() + "s")}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated", "team-llm"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def main(argv: list[str] | None = None) -> int:
    """Write the reviews; with ``--check`` print ``file: verdict (allowed)`` per review against the demo."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", default=str(EXAMPLES), help="directory of example YAML (default examples/)")
    p.add_argument("--out", default=str(HERE), help="output directory (default examples/admission/)")
    p.add_argument("--check", action="store_true", help="run each review through the webhook logic on the demo cluster")
    args = p.parse_args(argv)

    try:
        from webhook.adapters import is_supported
    except ImportError:  # running without the package installed: keep every object with a kind
        def is_supported(obj):  # type: ignore[misc]
            return isinstance(obj, dict) and obj.get("kind") in PLURALS

    src, out = Path(args.examples), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(src.glob("*.yaml")) + sorted(src.glob("*.yml"))
    if not files:
        print(f"no example YAML in {src}", file=sys.stderr)
        return 1
    written: list[Path] = []
    for f in files:
        objs = [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict) and is_supported(d)]
        for i, obj in enumerate(objs):
            stem = f.stem if len(objs) == 1 else f"{f.stem}-{i}"
            uid = str(uuid.uuid5(NAMESPACE, stem))
            target = out / f"{stem}.json"
            target.write_text(json.dumps(review_for(obj, uid), indent=2) + "\n")
            written.append(target)
    print(f"wrote {len(written)} AdmissionReview(s) to {out}", file=sys.stderr)

    if args.check:
        from webhook import admission as adm
        from webhook.dump import load_cluster
        from webhook.engine.evaluate import evaluate
        from webhook.policy import Policy

        snap, policy = load_cluster("demo"), Policy()
        for t in written:
            req = adm.parse_review(json.loads(t.read_text()))
            skip = adm.skip_reason(req, policy)
            gang = None if skip else adm.gang_of(req)
            if gang is None:
                print(f"{t.name}: not checked ({skip or 'not a gang'})")
                continue
            d = evaluate(snap, gang, policy.engine_options())
            r = adm.validate_response(req.uid, d, policy)["response"]
            print(f"{t.name}: {d.verdict} ({'allowed' if r['allowed'] else 'denied'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
