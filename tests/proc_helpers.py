"""Processes and their sockets, read from /proc: which processes descend from one,
and which TCP connections (by local port) each holds, so a test can tell a server's
connections (its /connz lists their ports) apart by the process behind them."""

from __future__ import annotations

import os
from pathlib import Path


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(root: int) -> list[int]:
    tree = children_by_parent()
    found, todo = [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def local_ports() -> dict[int, int]:
    """Socket inode -> local TCP port, from /proc/net/tcp and tcp6."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            ports[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


def connections_by_process(pids: list[int], ports: set[int]) -> dict[int, int]:
    """PID -> how many of the TCP connections whose local port is in ``ports`` it
    holds, for the processes ``pids`` (those holding none are left out)."""
    port_of = local_ports()
    held = {}
    for pid in pids:
        count = sum(1 for inode in socket_inodes(pid) if port_of.get(inode) in ports)
        if count:
            held[pid] = count
    return held
