"""The two data paths, checked against the import graph.

A keyboard action: transport -> protocols codec -> session inbound -> action timeline -> engine
host -> engine (at most 6 modules). A decoded frame, from the engine host to the wire: engine
host -> session output stream -> transport -> media packer -> protocols codec (at most 5).

Each path lists the modules that read or change the datum (or, for the engine host, move it to
or from the engine thread). Between two of them a hop may pass through `via` modules that only
hand the datum on (the session's port, the Session, the scheduler) or through the contract module
both sides share (wire messages, the engine API, the transport interface). The check: every hop
is a chain of real imports (either direction), and no hand-on module builds the datum's types.
"""

from __future__ import annotations

import ast
import itertools

import pytest

from tests._import_graph import module_sources, repo_graph

CONTRACTS = {"protocols.messages", "engine.api", "transports.interface"}
# the types the two data take on their way (none of them is built by a module that hands them on)
DATUM_TYPES = {"Action", "FrameAction", "ChunkFrames", "MediaItem", "OutFrame", "OutChunk", "Frame", "Media"}

Hop = tuple[str, str, tuple[str, ...]]  # (from, to, via)



def _action_path(transport: str) -> list[Hop]:
    return [
        (transport, "protocols.codec", ()),
        ("protocols.codec", "sessiond.session.inbound", (transport, "transports.interface", "sessiond.session.port")),
        ("sessiond.session.inbound", "sessiond.session.actions", ("sessiond.session.session",)),
        ("sessiond.session.actions", "sessiond.runtime.engine_host", ("sessiond.session.session", "sessiond.runtime.scheduler")),
        ("sessiond.runtime.engine_host", "engine.engine", ("engine.api",)),
    ]


ACTION_PATHS = {"websocket": _action_path("transports.websocket"), "webrtc": _action_path("transports.webrtc.peer")}

_TO_THE_TRANSPORT: tuple[str, ...] = ("sessiond.session.session", "sessiond.session.port", "transports.interface")

FRAME_PATHS: dict[str, list[Hop]] = {
    "raw": [
        ("sessiond.runtime.engine_host", "sessiond.session.output", ("sessiond.runtime.scheduler", "sessiond.session.session")),
        ("sessiond.session.output", "transports.websocket", _TO_THE_TRANSPORT),
        ("transports.websocket", "transports.raw", ("transports.interface",)),
        ("transports.raw", "protocols.codec", ("protocols.messages",)),
    ],
    "fmp4": [
        ("sessiond.runtime.engine_host", "sessiond.session.output", ("sessiond.runtime.scheduler", "sessiond.session.session")),
        ("sessiond.session.output", "transports.websocket", _TO_THE_TRANSPORT),
        ("transports.websocket", "transports.fmp4", ("transports.interface",)),
        ("transports.fmp4", "protocols.codec", ("protocols.messages",)),
    ],
    "webrtc": [
        ("sessiond.runtime.engine_host", "sessiond.session.output", ("sessiond.runtime.scheduler", "sessiond.session.session")),
        ("sessiond.session.output", "transports.webrtc.stream", _TO_THE_TRANSPORT),
        ("transports.webrtc.stream", "transports.encoding", ()),
    ],
}


def path_modules(hops: list[Hop]) -> list[str]:
    return [hops[0][0], *(to for _, to, _ in hops)]


def broken_hops(hops: list[Hop], graph: dict[str, set[str]]) -> list[str]:
    """The hops that are not a chain of imports (either direction), each named."""
    def linked(a: str, b: str) -> bool:
        return b in graph.get(a, set()) or a in graph.get(b, set())

    broken = []
    for start, end, via in hops:
        chain = [start, *via, end]
        gaps = [f"{a} / {b}" for a, b in itertools.pairwise(chain) if not linked(a, b)]
        if gaps:
            broken.append(f"{start} -> {end}: no import between {', '.join(gaps)}")
    return broken


def _built_types(source: str) -> set[str]:
    """Datum types a module calls (constructs)."""
    built = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in DATUM_TYPES:
                built.add(name)
    return built


ALL_PATHS = {f"action/{k}": v for k, v in ACTION_PATHS.items()} | {f"frame/{k}": v for k, v in FRAME_PATHS.items()}


@pytest.mark.parametrize("name", sorted(ALL_PATHS))
def test_each_hop_of_the_path_is_a_chain_of_imports(name: str) -> None:
    assert broken_hops(ALL_PATHS[name], repo_graph()) == []


@pytest.mark.parametrize(("kind", "limit"), [("action", 6), ("frame", 5)])
def test_the_paths_are_short(kind: str, limit: int) -> None:
    paths = ACTION_PATHS if kind == "action" else FRAME_PATHS
    assert {name: len(path_modules(hops)) for name, hops in paths.items() if len(path_modules(hops)) > limit} == {}


def test_modules_that_hand_the_data_on_never_build_their_types() -> None:
    sources = module_sources()
    handing_on = {m for hops in ALL_PATHS.values() for _, _, via in hops for m in via} - CONTRACTS
    handing_on -= {m for hops in ALL_PATHS.values() for m in path_modules(hops)}
    assert handing_on == {"sessiond.runtime.scheduler", "sessiond.session.session", "sessiond.session.port",
                          "transports.interface"} - CONTRACTS
    assert {m: sorted(_built_types(sources[m])) for m in sorted(handing_on) if _built_types(sources[m])} == {}


def test_a_hop_without_an_import_chain_is_named() -> None:
    graph = {"a": {"b"}, "b": set(), "c": set()}
    assert broken_hops([("a", "b", ()), ("b", "c", ())], graph) == ["b -> c: no import between b / c"]


def test_a_module_building_a_datum_type_is_seen() -> None:
    assert _built_types("from engine.api import FrameAction\nx = FrameAction(keys=())\ny = api.OutChunk(())\n") == {
        "FrameAction", "OutChunk"}
