"""Reading dumps and manifests from files (webhook.dump)."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from webhook.adapters.errors import AdapterError
from webhook.dump import DumpError, load_cluster, load_documents, load_objects

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "2025-01-01T00:00:00Z"
status:
  capacity: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "8"}}
  allocatable: {{cpu: "8", memory: 32Gi, nvidia.com/gpu: "{gpu}"}}
  conditions: [{{type: Ready, status: "True"}}]
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: llm}
spec:
  nodeName: n1
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: "4"}}}]
status:
  phase: Running
  startTime: 2025-06-01T10:00:00Z
"""


def plain(text: str) -> dict:
    """YAML → the dict kubectl -o json would give (timestamps as RFC 3339 strings)."""
    return json.loads(json.dumps(yaml.safe_load(text), default=lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")))


def test_list_kind_as_kubectl_writes_it(tmp_path):
    f = tmp_path / "dump.yaml"
    f.write_text(
        "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n"
        + "".join("- " + NODE.format(name=n, gpu=8).replace("\n", "\n  ").rstrip() + "\n" for n in ("n1", "n2"))
    )
    objs = load_objects(f)
    assert [o["metadata"]["name"] for o in objs] == ["n1", "n2"]
    assert all(o["kind"] == "Node" for o in objs)


def test_multi_document_yaml_and_timestamps_stay_strings(tmp_path):
    f = tmp_path / "dump.yml"
    f.write_text("---\n" + NODE.format(name="n1", gpu=8) + "---\n" + POD + "---\n")
    objs = load_objects(f)
    assert [o["kind"] for o in objs] == ["Node", "Pod"]
    assert objs[1]["status"]["startTime"] == "2025-06-01T10:00:00Z"  # not a datetime
    snap = load_cluster(f)
    assert len(snap.nodes) == 1 and snap.pods[0].start_time == 1748772000.0
    assert snap.source == str(f)


def test_json_list_and_typed_list(tmp_path):
    node = plain(NODE.format(name="n1", gpu=8))
    del node["kind"], node["apiVersion"]  # raw API list responses leave items untyped
    f = tmp_path / "nodes.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": [node]}, indent=2))
    objs = load_objects(f)
    assert objs[0]["kind"] == "Node" and objs[0]["apiVersion"] == "v1"
    g = tmp_path / "two.json"
    g.write_text(json.dumps(plain(POD)) + "\n" + json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}))
    assert [o["kind"] for o in load_objects(g)] == ["Pod", "Event"]


def test_directory_recursive_sorted(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pods.yaml").write_text(POD)
    (tmp_path / "a.yaml").write_text(NODE.format(name="n1", gpu=8))
    (tmp_path / "c.json").write_text(json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}))
    (tmp_path / "notes.txt").write_text("not: [a dump")
    (tmp_path / ".hidden.yaml").write_text("{{{")
    objs = load_objects(tmp_path)
    assert [o["kind"] for o in objs] == ["Node", "Pod", "Service"]  # a.yaml, b/pods.yaml, c.json
    snap = load_cluster(str(tmp_path))
    assert dict(snap.skipped) == {"Service": 1}
    assert snap.node_free("n1")["nvidia.com/gpu"] == 4


def test_missing_file_and_empty_directory(tmp_path):
    with pytest.raises(DumpError) as e:
        load_objects(tmp_path / "nope.yaml")
    assert str(e.value) == f"{tmp_path / 'nope.yaml'}: no such file or directory"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DumpError, match="no \\*.yaml, \\*.yml, \\*.json files"):
        load_objects(tmp_path / "empty")
    with pytest.raises(DumpError):
        load_cluster(str(tmp_path / "nope.yaml"))


def test_bad_yaml_reports_document_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(NODE.format(name="n1", gpu=8) + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    with pytest.raises(DumpError) as e:
        load_objects(f)
    err = e.value
    assert err.path == str(f) and err.document == 2
    assert err.line is not None and err.line >= 14
    assert str(err).startswith(f"{f}: document 2, line {err.line}: could not parse YAML")


def test_bad_json_reports_line(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{\n  "apiVersion": "v1",\n  "kind": "Node",\n  "metadata": {"name": }\n}\n')
    with pytest.raises(DumpError) as e:
        load_objects(f)
    assert e.value.line == 4 and e.value.document == 1 and "could not parse JSON" in str(e.value)


@pytest.mark.parametrize(
    "text,detail",
    [
        ("- a\n- b\n", "got a list"),
        ("just a string\n", "got a string"),
        ("kind: Node\nmetadata: {name: n}\n", "apiVersion missing"),
        ("apiVersion: v1\nmetadata: {name: n}\n", "kind missing"),
    ],
)
def test_document_that_is_not_an_object(tmp_path, text, detail):
    f = tmp_path / "x.yaml"
    f.write_text(NODE.format(name="n1", gpu=8) + "---\n" + text)
    with pytest.raises(DumpError) as e:
        load_objects(f)
    assert e.value.document == 2 and detail in str(e.value)


def test_adapter_error_names_file_and_document(tmp_path):
    f = tmp_path / "dump.yaml"
    f.write_text(NODE.format(name="n1", gpu=8) + "---\n" + NODE.format(name="n2", gpu="lots"))
    with pytest.raises(AdapterError) as e:
        load_cluster(str(f))
    assert str(e.value) == (
        f"{f}: document 2: Node n2: status.allocatable.nvidia.com/gpu: expected a quantity such as '8' or '500m', got 'lots'"
    )


def test_load_documents_stdin_and_path(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    name, objs = load_documents("-")
    assert name == "<stdin>" and objs[0]["metadata"]["name"] == "p1"
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(plain(POD))))
    assert load_documents("-")[1][0]["kind"] == "Pod"
    monkeypatch.setattr("sys.stdin", io.StringIO("---\n"))
    with pytest.raises(DumpError, match="<stdin>: no Kubernetes objects"):
        load_documents("-")
    f = tmp_path / "job.yaml"
    f.write_text(POD)
    assert load_documents(str(f)) == (str(f), [plain(POD)])


def test_load_cluster_demo():
    snap = load_cluster("demo")
    assert snap.source == "demo" and len(snap.nodes) == 403
