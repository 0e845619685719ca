"""Listening sockets: bound before anything slow starts, so a process whose port is taken exits at
once with an error that names the port and, when this host's /proc says, the process holding it;
and the TCP listeners of a process, read from /proc (what an operator checks with `ss -ltnp`).

`bind_listeners(host, port)` binds every address `host` resolves to (as uvicorn would) and starts
listening; the sockets are handed to uvicorn. `listeners(pid)` lists (address, port) of the
listening TCP sockets a process holds; `holders(port)` the processes listening on a port."""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from sessiond.errors import ServeConfigError

__all__ = ["Holder", "ListenError", "bind_listeners", "holders", "listeners"]

_PROC = Path("/proc")
_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp{,6}
_BACKLOG = 2048  # uvicorn's default


@dataclass(frozen=True)
class Holder:
    """A process listening on a port."""

    pid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


class ListenError(ServeConfigError):
    """The address or port cannot be listened on; the message says why and what to change."""


def _address(hex_addr: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_addr)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc prints an IPv6 address as four host-order 32-bit words
    return socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))


def _listening(proc: Path = _PROC) -> list[tuple[str, int, int]]:
    """(address, port, socket inode) of every listening TCP socket of this network namespace."""
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN:
                addr, port = fields[1].split(":")
                out.append((_address(addr, v6), int(port, 16), int(fields[9])))
    return out


def _socket_inodes(pid: int, proc: Path = _PROC) -> set[int]:
    found: set[int] = set()
    try:
        fds = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def listeners(pid: int, proc: Path = _PROC) -> list[tuple[str, int]]:
    """The (address, port) of each listening TCP socket process `pid` holds, sorted."""
    inodes = _socket_inodes(pid, proc)
    return sorted({(addr, port) for addr, port, inode in _listening(proc) if inode in inodes})


def _command(pid: int, proc: Path) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())[:160] or "?"


def holders(port: int, proc: Path = _PROC) -> list[Holder]:
    """The processes (this user can see) listening on TCP `port`, on any address."""
    inodes = {inode for _, p, inode in _listening(proc) if p == port}
    if not inodes:
        return []
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and _socket_inodes(int(entry.name), proc) & inodes:
            found.append(Holder(int(entry.name), _command(int(entry.name), proc)))
    return sorted(found, key=lambda h: h.pid)


def _held_by(port: int) -> str:
    found = holders(port)
    if not found:
        return "held by a process this user cannot see"
    return "held by " + ", ".join(str(h) for h in found)


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address `host` resolves to, or ListenError naming the port (and
    who holds it) when one cannot be bound."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError("host", f"{host!r} is not an address of this machine ({exc}); use e.g. 127.0.0.1") from exc
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise _bind_error(host, port, exc) from exc
            sock.listen(_BACKLOG)
            sock.set_inheritable(False)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def _bind_error(host: str, port: int, exc: OSError) -> ListenError:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return ListenError("port", f"port {port} on {host} is already in use ({_held_by(port)}); stop that "
                           f"process or choose another --port")
    if exc.errno == errno.EADDRNOTAVAIL:
        return ListenError("host", f"cannot listen on {where}: {host} is not an address of this machine; use one "
                           "it has (e.g. 127.0.0.1)")
    if exc.errno == errno.EACCES:
        return ListenError("port", f"cannot listen on {where}: ports below 1024 need privileges; choose a port "
                           "from 1024 up")
    return ListenError("port", f"cannot listen on {where}: {exc.strerror or exc}")
