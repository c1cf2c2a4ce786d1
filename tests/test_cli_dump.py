"""``gangcheck dump`` (#17 item 19) against the scripted list/watch server the cache tests use:
what it writes, that ``--cluster FILE`` reads it through the fast JSON reader, that absent APIs
are skipped with a note, a continue token that expires mid-list, progress on stderr, bad
kubeconfigs, and the round trip: ``check --cluster <dumped file>`` decides exactly as
``check --cluster live`` on the same server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from scripted_apiserver import ScriptedAPIServer, make_cluster_queue, make_pod, populate  # noqa: E402

from webhook import cli_dump  # noqa: E402
from webhook import dump as dump_mod  # noqa: E402
from webhook.cli import main  # noqa: E402
from webhook.dump import load_cluster  # noqa: E402

NOW = "2025-06-01T12:00:00Z"


def kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: s, cluster: {{server: \"{url}\"}}}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: c, context: {cluster: s, user: u}}]\n"
        "current-context: c\n")
    return path


def kueue_objects() -> list[dict]:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "team-a"},
          "spec": {"clusterQueue": "cq"}}
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep", "namespace": "team-00"},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "job-00000"}}}}
    return [flavor, make_cluster_queue("cq", 200), lq, pc, pdb]


@pytest.fixture
def server():
    srv = ScriptedAPIServer().start()
    srv.not_installed = {"scheduling.volcano.sh", "scheduling.x-k8s.io"}
    populate(srv, 40, 1300)  # 1,300 pods: 3 pages of 500
    srv.load(kueue_objects())
    srv.load([make_pod("pending-0", "team-a", gpus=8, job="other")])  # unbound: no startTime
    srv.load([make_pod("done-0", "team-a", node="node-00001", phase="Succeeded")])  # terminal: not listed
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def env(server, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", server.url)))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return tmp_path


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dump_writes_a_json_list_the_fast_reader_takes(server, env, capsys):
    out = env / "cluster.json"
    code, stdout, err = run(capsys, "dump", "-o", out)
    assert code == 0, err
    assert stdout == ""
    doc = json.loads(out.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    kinds: dict[str, int] = {}
    for item in doc["items"]:
        assert item["apiVersion"] and item["kind"]  # core list items get theirs back
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    assert kinds == {"Node": 40, "Pod": 1301, "ResourceFlavor": 1, "ClusterQueue": 1, "LocalQueue": 1,
                     "PriorityClass": 1, "PodDisruptionBudget": 1}
    assert not any(i["metadata"]["name"] == "done-0" for i in doc["items"])  # terminal pods left out, as the cache does
    names = [(i["kind"], i["metadata"].get("namespace"), i["metadata"]["name"]) for i in doc["items"]]
    assert len(names) == len(set(names))
    # the fast JSON reader takes it (not the general fallback)
    objects, _, items = dump_mod._read_json_fast(out, False)
    assert items and len(objects) == len(doc["items"])
    snap = load_cluster(out)
    assert len(snap.nodes) == 40 and len(snap.pods) == 1301
    assert set(snap.kueue.cluster_queues) == {"cq"} and set(snap.kueue.local_queues) == {("team-a", "team-a")}
    # absent APIs: a note each on stderr, and the summary
    for name in ("volcano.queues", "volcano.podgroups", "coscheduling.podgroups"):
        assert f"gangcheck: dump: {name}: skipped: " in err and "not installed" in err
    assert f"wrote {out}" in err and "nodes 40" in err and "pods 1,301" in err


def test_dump_to_stdout(server, env, capsys):
    code, stdout, err = run(capsys, "dump")
    assert code == 0, err
    doc = json.loads(stdout)
    assert sum(1 for i in doc["items"] if i["kind"] == "Node") == 40
    assert "wrote stdout" in err


def test_round_trip_check_on_the_dump_decides_as_check_live(server, env, capsys):
    out = env / "cluster.json"
    assert run(capsys, "dump", "-o", out)[0] == 0
    jobs = env / "jobs.yaml"
    jobs.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: big, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: team-a}}\n"
        "spec: {parallelism: 30, completions: 30, template: {spec: {restartPolicy: Never, containers: [{name: m, image: i, "
        "resources: {limits: {nvidia.com/gpu: '8'}}}]}}}\n"
        "---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: small, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: team-a}}\n"
        "spec: {parallelism: 4, completions: 4, template: {spec: {restartPolicy: Never, containers: [{name: m, image: i, "
        "resources: {limits: {nvidia.com/gpu: '1', cpu: '1'}}}]}}}\n"
        "---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: cpu, namespace: team-b}\n"
        "spec: {parallelism: 2, completions: 2, template: {spec: {restartPolicy: Never, containers: [{name: m, image: i, "
        "resources: {limits: {cpu: '2'}}}]}}}\n")
    code_file, from_file, _ = run(capsys, "check", jobs, "--cluster", out, "-o", "json", "--now", NOW)
    code_live, from_live, err = run(capsys, "check", jobs, "--cluster", "live", "-o", "json", "--now", NOW, "--timeout", "60")
    assert "live cache synced" in err
    file_docs, live_docs = json.loads(from_file), json.loads(from_live)
    assert code_file == code_live
    assert [d["verdict"] for d in file_docs] == [d["verdict"] for d in live_docs]
    assert {d["verdict"] for d in file_docs} >= {"NeverFits", "Waits"}  # the round trip covers a denial and a wait
    for f, lv in zip(file_docs, live_docs):
        for key in ("verdict", "allowed", "reasons", "message", "warnings", "nodes", "quota", "fragmentation", "expected_wait"):
            assert f[key] == lv[key], key
        assert f["cluster"]["nodes"] == lv["cluster"]["nodes"] and f["cluster"]["pods"] == lv["cluster"]["pods"]


def test_a_continue_token_that_expires_mid_list_restarts_the_resource(server, env, capsys):
    orig = server._list_page
    expired = []

    def list_page(coll, ns, selector, limit, cont):
        status, body = orig(coll, ns, selector, limit, cont)
        if coll == "/pods" and not cont and not expired:
            expired.append(True)
            with server._lock:
                server._snapshots.clear()  # the next continue request gets 410 Expired
        return status, body

    server._list_page = list_page
    out = env / "cluster.json"
    code, _, err = run(capsys, "dump", "-o", out)
    assert code == 0, err
    assert expired
    pods = [i for i in json.loads(out.read_text())["items"] if i["kind"] == "Pod"]
    assert len(pods) == 1301 and len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}) == 1301
    lists = [r for r in server.requests if r.startswith("GET /api/v1/pods?") and "continue=" not in r]
    assert len(lists) == 2  # the list started over once


def test_progress_lines_on_big_lists(server, env, capsys, monkeypatch):
    monkeypatch.setattr(cli_dump, "PROGRESS_EVERY", 500)
    code, _, err = run(capsys, "dump", "-o", env / "c.json", "--page-size", "250")
    assert code == 0
    assert "gangcheck: dump: pods: 500 so far" in err and "gangcheck: dump: pods: 1,000 so far" in err


def test_unreachable_cluster_is_exit_2(env, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "dead", "http://127.0.0.1:9")))
    monkeypatch.setattr(cli_dump, "ATTEMPTS", 1)
    out = tmp_path / "c.json"
    code, _, err = run(capsys, "dump", "-o", out)
    assert code == 2 and err.startswith("gangcheck: error: --cluster live (http://127.0.0.1:9): ") and err.count("\n") == 1, err
    assert not out.exists() and not list(tmp_path.glob(".c.json.*"))  # no half-written file left


@pytest.mark.parametrize("content", [b"garbage: [\n", b"\x89PNG\xff\xfe", b"hello\n", None])
def test_garbage_kubeconfig_names_the_file(capsys, monkeypatch, tmp_path, content):
    kc = tmp_path / "kc"
    if content is not None:
        kc.write_bytes(content)
    monkeypatch.setenv("KUBECONFIG", str(kc))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for args in (["dump", "-o", str(tmp_path / "x.json")], ["fragmentation", "--cluster", "live"],
                 ["check", str(Path(__file__).parent.parent / "examples" / "job-8x8.yaml"), "--cluster", "live"]):
        code, _, err = run(capsys, *args)
        assert code == 2, (args, err)
        assert err.startswith("gangcheck: error: --cluster live: ") and str(kc) in err and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_output_is_a_directory(server, env, capsys):
    code, _, err = run(capsys, "dump", "-o", env)
    assert code == 2 and str(env) in err and "is a directory" in err
