"""The folders are the architecture: imports only go the way the layers allow, and no module
imports itself back through others (no import circles, string imports included)."""

from __future__ import annotations

from tests._import_graph import find_cycles, graph_of_sources, our_packages, repo_graph

# package -> the packages of ours it may import
ALLOWED = {
    "protocols": set(),
    "engine": set(),
    # above the engine core, which imports neither: the demo model family registers itself with the
    # engine's catalog; the tools (bench, profile, convert, selfcheck) measure and convert
    "demo": {"engine"},
    "enginetools": {"engine", "demo"},
    "transports": {"protocols"},
    # the public HTTP surface (route table, error bodies, token) both the daemon and the gateway mount
    "httpapi": {"protocols"},
    "sessiond": {"engine", "demo", "enginetools", "transports", "protocols", "httpapi"},
    # the load tools drive the daemon as clients do; their WebRTC spectator is the transports' own watcher
    "loadtest": {"sessiond", "engine", "protocols", "fleet", "transports"},
    # the fleet speaks the public protocol and declares the daemon interface it needs
    "fleet": {"protocols", "httpapi"},
}
# the one way into the load-test tooling from the daemon: its command line dispatches the
# replay and trace subcommands; the daemon's runtime never imports loadtest. The daemon joins a
# fleet only through its adapter and the fleet commands (`serve --fleet`, `gateway`), which the
# single daemon never imports
DISPATCH = {"sessiond.cli": {"loadtest"}, "sessiond.fleet_adapter.daemon": {"fleet"}, "sessiond.fleet_adapter.serve": {"fleet"},
            "sessiond.commands.gateway": {"fleet"}, "sessiond.commands.drain": {"fleet"}}


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, imported in sorted(graph.items()):
        package = module.split(".")[0]
        allowed = ALLOWED.get(package, set()) | {package} | DISPATCH.get(module, set())
        bad = sorted(m for m in imported if m.split(".")[0] not in allowed)
        if bad:
            out.append(f"{module} imports {bad}")
    return out


def test_every_package_of_the_project_has_a_layer_rule() -> None:
    assert set(our_packages()) <= set(ALLOWED), f"add a layer rule for {sorted(set(our_packages()) - set(ALLOWED))}"


def test_each_package_imports_only_what_its_layer_allows() -> None:
    assert _layer_violations(repo_graph()) == []


def test_the_layer_check_sees_a_violation() -> None:
    graph = graph_of_sources({"engine.core": "import sessiond.cli\n", "sessiond.cli": "def main():\n    from engine import core\n",
                              "engine": "", "sessiond": ""})
    assert _layer_violations(graph) == ["engine.core imports ['sessiond.cli']"]


def test_no_module_imports_itself_back() -> None:
    cycles = [" -> ".join(cycle) for cycle in find_cycles(repo_graph())]
    assert cycles == [], "import circles (break each by moving what both need into a lower module):\n" + "\n".join(cycles)


def test_a_circle_through_a_function_level_import_is_found_and_named() -> None:
    graph = graph_of_sources({
        "pkg": "",
        "pkg.a": "from pkg import b\n",
        "pkg.b": "def later():\n    from pkg.c import thing\n",
        "pkg.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n",
        "pkg.d": "import pkg.a\n",
    })
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_a_circle_through_a_string_import_is_found() -> None:
    graph = graph_of_sources({
        "pkg": "",
        "pkg.cli": 'import importlib\nCOMMANDS = {"serve": "pkg.serve"}\nimportlib.import_module(COMMANDS["serve"])\n',
        "pkg.serve": "from pkg.cli import COMMANDS\n",
        "pkg.other": 'NAME = "pkg.serve"  # only a string: no import_module here\n',
    })
    assert find_cycles(graph) == [["pkg.cli", "pkg.serve", "pkg.cli"]]
    assert graph["pkg.other"] == set()


def test_relative_imports_resolve_to_the_module_they_name() -> None:
    graph = graph_of_sources({"pkg": "", "pkg.sub": "from . import leaf\n", "pkg.sub.leaf": "from .. import top\n",
                              "pkg.top": "from .sub.leaf import x\n"})
    assert graph == {"pkg": set(), "pkg.sub": {"pkg.sub.leaf"}, "pkg.sub.leaf": {"pkg.top"},
                     "pkg.top": {"pkg.sub.leaf"}}
