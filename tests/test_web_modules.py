"""Each page names every module its script imports, directly or through another module, as a
`modulepreload` link in its head, and nothing else: the browser then fetches them at once instead of
one import level after another (a cold spectator page waited 0.53-0.65 s before its script ran, 50
spectators connecting beside it). A module added to a page's import graph must be added there too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[1] / "web"


def _imports(module: str) -> list[str]:
    return re.findall(r'from "\./([a-z_]+\.js)"', (WEB / module).read_text())


def _graph(entry: str) -> set[str]:
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += _imports(module)
    return seen


@pytest.mark.parametrize(("page", "entry"), [("watch.html", "watch.js"), ("world.html", "world.js"),
                                             ("director.html", "director.js")])
def test_a_page_preloads_exactly_the_modules_its_script_imports(page: str, entry: str) -> None:
    html = (WEB / page).read_text()
    head = html.split("</head>")[0]
    preloaded = re.findall(r'<link rel="modulepreload" href="([a-z_]+\.js)">', head)
    assert f'<script type="module" src="{entry}"></script>' in html
    assert len(preloaded) == len(set(preloaded))
    assert set(preloaded) == _graph(entry)
    assert {"session.js", "status.js"} <= set(preloaded)  # the graph is read through the imports
