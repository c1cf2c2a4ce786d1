"""`gangcheck --help`, `serve --help` and `certs --help` tell a platform engineer what the
Deploying section relies on: where the caBundle goes (stdout), which names the certificate
carries, what `serve` does without --policy, and every command's exit codes."""

from __future__ import annotations

import pytest

from webhook.cli import build_parser


def _help(*command: str) -> str:
    parser = build_parser()
    if command:
        sub = next(a for a in parser._actions if a.dest == "command")
        parser = sub.choices[command[0]]
    return " ".join(parser.format_help().split())


def test_top_level_help_gives_serve_and_certs_exit_codes():
    text = _help()
    assert "serve — 0 stopped by a signal, 2 bad input" in text
    assert "certs — 0 written, 2 bad input or the files cannot be written" in text


@pytest.mark.parametrize("needle", [
    "--service NAME", "--namespace NAMESPACE", "--out DIR", "--days N",
    "only the caBundle goes to stdout",
    "NAME.NAMESPACE.svc",
    "keys are written 0600",
    "the caBundle stays the same",
])
def test_certs_help_says_what_it_writes_and_prints(needle):
    assert needle in _help("certs")


@pytest.mark.parametrize("needle", [
    "without it: the default policy, and with --cluster live the ConfigMap gangcheck-system/gangcheck-policy",
    "0.0.0.0 in a pod",
    "'live' (KUBECONFIG or in-cluster; what the image and manifests/ run)",
])
def test_serve_help_says_what_the_defaults_do(needle):
    assert needle in _help("serve")
