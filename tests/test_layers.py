"""The folders are the architecture: imports only go the way DESIGN.md says."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = {"protocols", "engine", "sessiond", "transports", "loadtest", "fleet"}
ALLOWED = {
    "protocols": set(),
    "engine": set(),
    "transports": {"protocols"},
    "sessiond": {"engine", "transports", "protocols"},
    "loadtest": {"sessiond", "engine", "protocols"},
    # the fleet speaks the public protocol and declares the daemon interface it needs
    "fleet": {"protocols"},
}
# the one way into the load-test tooling from the daemon: its command line dispatches the
# replay and trace subcommands; the daemon's runtime never imports loadtest
DISPATCH = {Path("sessiond/cli.py"): {"loadtest"}}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & OURS


def test_each_package_imports_only_what_design_allows() -> None:
    violations = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            bad = _imported_packages(path) - allowed - {package} - DISPATCH.get(path.relative_to(ROOT), set())
            if bad:
                violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert violations == []


def test_the_layer_check_sees_a_violation() -> None:
    probe = ROOT / "tests" / "_layer_probe_tmp.py"
    probe.write_text("import engine\nfrom sessiond import cli\n")
    try:
        assert _imported_packages(probe) == {"engine", "sessiond"}
    finally:
        probe.unlink()
