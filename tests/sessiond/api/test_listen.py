"""Listening sockets read from /proc and bound before a server starts: a taken port is an error
naming the port and the process that holds it."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from sessiond.api.listen import ListenError, bind_listeners, holders, listeners


def test_a_taken_port_names_itself_and_its_holder() -> None:
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        assert ("127.0.0.1", port) in listeners(os.getpid())
        assert [h.pid for h in holders(port)] == [os.getpid()]
        with pytest.raises(ListenError) as err:
            bind_listeners("127.0.0.1", port)
    assert err.value.option == "port"
    assert f"port {port} on 127.0.0.1 is already in use (held by pid {os.getpid()} (" in str(err.value)
    assert str(err.value).endswith("stop that process or choose another --port")


def test_bound_sockets_listen_where_asked_and_only_there() -> None:
    socks = bind_listeners("127.0.0.1", 0)
    try:
        port = socks[0].getsockname()[1]
        mine = [entry for entry in listeners(os.getpid()) if entry[1] == port]
        assert mine == [("127.0.0.1", port)]
    finally:
        for sock in socks:
            sock.close()
    assert ("127.0.0.1", port) not in listeners(os.getpid())


def test_ipv6_loopback_is_read_back_as_written() -> None:
    with socket.create_server(("::1", 0), family=socket.AF_INET6) as held:
        port = held.getsockname()[1]
        assert ("::1", port) in listeners(os.getpid())


class _NotHere(socket.socket):
    """A socket whose bind fails as the kernel's does for an address the machine does not have
    (EADDRNOTAVAIL), so the test needs no address beyond loopback."""

    def bind(self, address: object) -> None:
        raise OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")


def test_an_address_not_of_this_machine_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sessiond.api.listen.socket.socket", _NotHere)
    with pytest.raises(ListenError) as err:
        bind_listeners("127.0.0.1", 8000)
    assert err.value.option == "host"
    assert "cannot listen on 127.0.0.1:8000: 127.0.0.1 is not an address of this machine" in str(err.value)
