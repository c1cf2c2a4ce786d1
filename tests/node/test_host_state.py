"""node_host.HostState finds and puts back what a run leaves on the host — the check behind the
real-node tier's "leaves nothing behind" teardown. Real changes (a bridge, an iptables chain and
rule, a sysctl), made under the tier's lock; this module sorts before the scenarios so it runs
before the session's node starts (with the node up, a restore would undo the node's own changes:
then it is skipped, saying so)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from node_cluster import RUNNING, TierLock, missing
from node_host import HostState

SYSCTL = Path("/proc/sys/net/ipv4/conf/all/route_localnet")


@pytest.fixture
def locked(request):
    if RUNNING:
        pytest.skip("the session's real node is up: restoring the host would undo its changes")
    reason = missing()
    if reason:
        pytest.skip(f"needs what the real-node tier needs: {reason}")
    lock = TierLock()
    lock.acquire()
    yield
    lock.release()


def test_leftovers_are_found_and_restored(locked):
    state = HostState.record(Path(tempfile.mkdtemp(prefix="gangcheck-hoststate-")))
    old = SYSCTL.read_text().strip()
    try:
        subprocess.run(["ip", "link", "add", "gcnode-test", "type", "bridge"], check=True)
        subprocess.run(["iptables", "-t", "raw", "-N", "GCNODE-TEST"], check=True)
        subprocess.run(["iptables", "-t", "raw", "-A", "PREROUTING", "-j", "GCNODE-TEST"], check=True)
        SYSCTL.write_text("0" if old == "1" else "1")
        assert sorted(state.leftovers()) == sorted([
            "link gcnode-test", "iptables-save: added raw|-A PREROUTING -j GCNODE-TEST",
            "iptables-save: added raw|chain GCNODE-TEST",
            f"sysctl net/ipv4/conf/all/route_localnet: {old} before, {'0' if old == '1' else '1'} now"])
        done = state.restore()
        assert "ip link delete gcnode-test" in done and "iptables -t raw -X GCNODE-TEST" in done, done
        assert state.leftovers() == []
        assert SYSCTL.read_text().strip() == old
    finally:  # whatever happened above, nothing of this test stays
        subprocess.run(["iptables", "-t", "raw", "-D", "PREROUTING", "-j", "GCNODE-TEST"], capture_output=True)
        subprocess.run(["iptables", "-t", "raw", "-X", "GCNODE-TEST"], capture_output=True)
        subprocess.run(["ip", "link", "delete", "gcnode-test"], capture_output=True)
        SYSCTL.write_text(old)
        os.rmdir(state.tier_dir)
