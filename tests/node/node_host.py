"""What the real-node tier changes on the host, recorded before and put back after.

The kubelet, containerd's CRI plugin, the CNI bridge plugin and kube-proxy write outside the
tier's directory (REAL-CLUSTER.md "A real node"): sysctls, iptables chains, cgroups (kubepods
in every cgroup v1 hierarchy), network namespaces (/var/run/netns/cni-*), links (the bridge and
the pods' veths), mounts (snapshots, pod volumes, netns pins) and a few directories.
``HostState.record()`` takes a snapshot; ``restore()`` puts back what changed (only what the tier
created: a path that existed before is never removed) and ``leftovers()`` lists what is still
different, for the final assertion.

Sysctls: the ones these components are known to set — the kubelet's kernel tunables
(kubernetes pkg/kubelet/cm/container_manager_linux.go ``setupKernelTunables``: vm.overcommit_memory,
vm.panic_on_oom, kernel.panic, kernel.panic_on_oops, kernel.keys.root_maxkeys/root_maxbytes),
the bridge plugin's ip_forward (containernetworking/plugins plugins/main/bridge), kube-proxy's
route_localnet and conntrack settings (pkg/proxy/iptables/proxier.go, cmd/kube-proxy/app/conntrack.go).

iptables: rules and non-built-in chains of every table (iptables and ip6tables); a built-in
chain with policy ACCEPT and no rules counts as absent (iptables-nft shows a table once used).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SYSCTLS = (
    "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet", "net/ipv4/conf/all/forwarding",
    "net/ipv6/conf/all/forwarding", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
)
#: Directories the components create outside the tier's own: removed afterwards only if absent before.
HOST_DIRS = ("/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni", "/etc/cni",
             "/opt/cni", "/var/run/netns", "/run/netns")
#: Shared with other containerd users (tests/image): only its empty directories are removed.
RUN_CONTAINERD = Path("/run/containerd")
CGROUP_ROOT = Path("/sys/fs/cgroup")
NETNS_DIRS = (Path("/var/run/netns"), Path("/run/netns"))


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def _run(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def iptables_state(save: str) -> set[str]:
    """The rules and non-built-in chains of ``iptables-save`` output, as a set of lines
    ``table|line`` (counters and comments dropped; empty ACCEPT built-in chains omitted)."""
    out: set[str] = set()
    table = ""
    for line in _run(save).splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            name, policy = line[1:].split()[:2]
            if policy == "-":  # a user chain
                out.add(f"{table}|chain {name}")
            elif policy != "ACCEPT":
                out.add(f"{table}|policy {name} {policy}")
        elif line.startswith("-A"):
            out.add(f"{table}|{line}")
    return out


def mounts() -> list[str]:
    with open("/proc/self/mounts") as f:
        return [line.split()[1].replace("\\040", " ") for line in f]


def links() -> set[str]:
    return {line.split(":")[1].strip().split("@")[0] for line in _run("ip", "-o", "link", "show").splitlines() if ":" in line}


def cgroup_dirs() -> set[str]:
    """Top-level cgroup directories of every hierarchy (``cpu/kubepods``, ...)."""
    out = set()
    if CGROUP_ROOT.is_dir():
        for h in CGROUP_ROOT.iterdir():
            if h.is_dir() and not h.is_symlink():
                try:
                    out |= {f"{h.name}/{d.name}" for d in h.iterdir() if d.is_dir()}
                except OSError:
                    pass
    return out


def netns() -> set[str]:
    return {str(d / n) for d in NETNS_DIRS if d.is_dir() for n in os.listdir(d)}


@dataclass
class HostState:
    tier_dir: Path
    sysctls: dict[str, str | None] = field(default_factory=dict)
    iptables: dict[str, set[str]] = field(default_factory=dict)
    mounts: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    cgroups: set[str] = field(default_factory=set)
    netns: set[str] = field(default_factory=set)
    dirs: dict[str, bool] = field(default_factory=dict)
    run_containerd: bool = False

    @classmethod
    def record(cls, tier_dir: Path) -> "HostState":
        s = cls(Path(tier_dir))
        s.sysctls = {k: _read(Path("/proc/sys") / k) for k in SYSCTLS}
        s.iptables = {t: iptables_state(t) for t in ("iptables-save", "ip6tables-save") if shutil.which(t)}
        s.mounts, s.links, s.cgroups, s.netns = set(mounts()), links(), cgroup_dirs(), netns()
        s.dirs = {d: os.path.lexists(d) for d in HOST_DIRS}
        s.run_containerd = RUN_CONTAINERD.exists()
        return s

    # ------------------------------------------------------------ restore
    def restore(self) -> list[str]:
        """Put back what changed; returns what was done (for the log)."""
        done: list[str] = []
        # mounts first (deepest first): snapshots, pod volumes, netns pins, shm
        for m in sorted(set(mounts()) - self.mounts, key=lambda p: p.count("/"), reverse=True):
            if subprocess.run(["umount", m], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True)
            done.append(f"umount {m}")
        for ns in sorted(netns() - self.netns):
            try:
                os.remove(ns)
                done.append(f"rm netns {ns}")
            except OSError:
                pass
        for ln in sorted(links() - self.links):
            if subprocess.run(["ip", "link", "delete", ln], capture_output=True).returncode == 0:
                done.append(f"ip link delete {ln}")
        done += self._restore_iptables()
        done += self._restore_cgroups()
        for k, v in self.sysctls.items():
            now = _read(Path("/proc/sys") / k)
            if v is not None and now != v:
                try:
                    (Path("/proc/sys") / k).write_text(v + "\n")
                    done.append(f"sysctl {k}: {now} -> {v}")
                except OSError as e:
                    done.append(f"sysctl {k}: cannot restore {v} ({e})")
        for d, existed in self.dirs.items():
            if not existed and os.path.lexists(d):
                shutil.rmtree(d, ignore_errors=True)
                done.append(f"rm -r {d}")
        if not self.run_containerd and RUN_CONTAINERD.is_dir():
            for p in sorted(RUN_CONTAINERD.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [RUN_CONTAINERD]:
                if p.is_dir() and not p.is_symlink() and not any(p.iterdir()):
                    p.rmdir()
        return done

    def _restore_iptables(self) -> list[str]:
        done = []
        for save, before in self.iptables.items():
            tool = save.replace("-save", "")
            extra = iptables_state(save) - before
            # delete rules first (they reference chains), then flush + delete the new chains
            for item in sorted(x for x in extra if "|-A " in x):
                table, rule = item.split("|", 1)
                argv = [tool, "-t", table, "-D", *_split_rule(rule[3:])]
                if subprocess.run(argv, capture_output=True).returncode == 0:
                    done.append(f"{tool} -t {table} -D {rule[3:]}")
            chains = [x.split("|", 1) for x in extra if "|chain " in x]
            for table, c in chains:
                subprocess.run([tool, "-t", table, "-F", c.split()[1]], capture_output=True)
            for table, c in chains:
                if subprocess.run([tool, "-t", table, "-X", c.split()[1]], capture_output=True).returncode == 0:
                    done.append(f"{tool} -t {table} -X {c.split()[1]}")
        return done

    def _restore_cgroups(self) -> list[str]:
        done = []
        for rel in sorted(cgroup_dirs() - self.cgroups):
            top = CGROUP_ROOT / rel
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) + [top]
            for p in dirs:
                try:
                    p.rmdir()
                except OSError:
                    pass
            if not top.exists():
                done.append(f"rmdir cgroup {rel}")
        return done

    # ------------------------------------------------------------ check
    def leftovers(self) -> list[str]:
        """What still differs from the snapshot (empty when everything was put back)."""
        out = []
        out += [f"mount {m}" for m in sorted(set(mounts()) - self.mounts)]
        out += [f"netns {n}" for n in sorted(netns() - self.netns)]
        out += [f"link {ln}" for ln in sorted(links() - self.links)]
        out += [f"cgroup {c}" for c in sorted(cgroup_dirs() - self.cgroups)]
        for save, before in self.iptables.items():
            now = iptables_state(save)
            out += [f"{save}: added {x}" for x in sorted(now - before)]
            out += [f"{save}: removed {x}" for x in sorted(before - now)]
        for k, v in self.sysctls.items():
            now = _read(Path("/proc/sys") / k)
            if now != v:
                out.append(f"sysctl {k}: {v} before, {now} now")
        out += [f"dir {d}" for d, existed in self.dirs.items() if not existed and os.path.lexists(d)]
        if not self.run_containerd and RUN_CONTAINERD.exists():
            out.append(f"dir {RUN_CONTAINERD}")
        return out


def _split_rule(rule: str) -> list[str]:
    """``iptables-save`` rule text (after ``-A``) → argv, honouring double quotes."""
    return [t.replace('"', "") for t in re.findall(r'"[^"]*"|\S+', rule)]
