"""Adversarial inputs for the fast JSON dump reader (PodStruct + _PodReader), sequential and
with forked workers: it must read them as the general reader does.

A number msgspec will not decode (``1e400``; the general reader's ``json`` fallback reads it as
``inf``) inside a sub-document the fast path keeps raw (labels, annotations, container
resources) once made the fast path's fallback raise ``msgspec.ValidationError`` out of
``build_snapshot``; a ports value that is not a list and an activeDeadlineSeconds past int64
raised TypeError / OverflowError in both readers."""

from __future__ import annotations

import pytest

from webhook.adapters.errors import AdapterError
from webhook.dump import load_cluster
import webhook.dump as dump_module


def _pod_list(pod_json: str) -> str:
    return '{"apiVersion":"v1","kind":"List","items":[' + pod_json + "]}"


LABEL_1E400 = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a","labels":{"x":1e400}},"spec":{"nodeName":"n1"}}'
ANNOTATION_1E400 = ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a",'
                    '"annotations":{"gangcheck.io/expected-runtime-seconds":1e400}},"spec":{"nodeName":"n1"}}')
CPU_1E400 = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"n1","containers":[{"resources":{"requests":{"cpu":1e400}}}]}}'


@pytest.fixture(params=["sequential", "workers"])
def mode(request, monkeypatch):
    if request.param == "workers":
        monkeypatch.setattr(dump_module, "PARALLEL_MIN_ITEMS", 1)
        monkeypatch.setenv("GANGCHECK_LOAD_WORKERS", "3")
    else:
        monkeypatch.setenv("GANGCHECK_LOAD_WORKERS", "1")
    return request.param


def _write(tmp_path, text: str):
    path = tmp_path / "dump.json"
    path.write_text(text)
    return path


def test_label_value_1e400_reads_as_the_general_reader_does(tmp_path, mode):
    # General reader: the label value is the float inf, kept as the string "inf".
    snap = load_cluster(_write(tmp_path, _pod_list(LABEL_1E400)))
    (pod,) = snap.pods
    assert (pod.namespace, pod.name, pod.node_name) == ("a", "p", "n1")
    assert dict(pod.labels) == {"x": "inf"}


def test_annotation_1e400_reads_as_the_general_reader_does(tmp_path, mode):
    # General reader: an expected-runtime annotation that is not a finite positive number is ignored.
    snap = load_cluster(_write(tmp_path, _pod_list(ANNOTATION_1E400)))
    (pod,) = snap.pods
    assert (pod.namespace, pod.name) == ("a", "p")
    assert pod.runtime_limit_s is None


def test_quantity_1e400_is_the_general_readers_adapter_error(tmp_path, mode):
    path = _write(tmp_path, _pod_list(CPU_1E400))
    with pytest.raises(AdapterError) as e:
        load_cluster(path)
    assert str(e.value) == f"{path}: document 1, item 1: Pod a/p: spec.containers[0].resources.requests.cpu: quantity too large, got inf"


@pytest.mark.parametrize("field,value,message", [
    ("ports", "5", "spec.containers[0].ports: expected a list, got int"),
    ("deadline", str(10**400), "spec.activeDeadlineSeconds: expected an integer ≤ 9223372036854775807"),
])
def test_bad_ports_and_huge_deadline_are_adapter_errors(tmp_path, mode, field, value, message):
    # Were a TypeError and an OverflowError: bad input gets an error naming the field.
    if field == "ports":
        pod = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"n1","containers":[{"name":"c","ports":' + value + '}]}}'
    else:
        pod = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"n1","activeDeadlineSeconds":' + value + '}}'
    path = _write(tmp_path, _pod_list(pod))
    with pytest.raises(AdapterError) as e:
        load_cluster(path)
    assert str(e.value).startswith(f"{path}: document 1, item 1: Pod a/p: ") and message in str(e.value)
