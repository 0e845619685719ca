"""Every browser test is in the slow lane: Chromium takes seconds to start, and the fast lane
(`-m "not slow"`) must not need it."""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).parent


def _marks(module: ast.Module) -> set[str]:
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and n.attr != "mark"}
    return set()


def test_every_browser_test_module_is_marked_browser_and_slow() -> None:
    unmarked = sorted(p.name for p in HERE.glob("test_*.py")
                      if p.name != Path(__file__).name and not {"browser", "slow"} <= _marks(ast.parse(p.read_text())))
    assert unmarked == []
