"""The `Session` is the only writer of its state: no code outside sessiond/session/ assigns (or
deletes, or mutates in place) an attribute of a Session, its record included. The scheduler,
admission, the fleet's hand-off and the directory call the Session's methods instead.

Read with `ast`: a receiver is a Session when it is a parameter or variable annotated `Session`,
a name bound from a `sessions` / `handed_off` mapping (`.get`, `.pop`, `[...]`, iterating its
values or items) or from `Session(...)`, a `sessions[...]` subscript, an attribute named
`session` / `_session`, or a name spelled `session`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests._import_graph import ROOT, module_sources

_SESSION_MODULE = ROOT / "sessiond" / "session" / "session.py"
_OWNER = "sessiond.session"
_CONTAINERS = {"sessions", "handed_off"}
_TAKE = {"get", "pop", "setdefault"}
_MUTATORS = {"append", "appendleft", "extend", "clear", "insert", "pop", "popleft", "remove", "update", "add",
             "discard", "sort", "reverse", "setdefault"}


def session_attributes(source: str) -> set[str]:
    """Every attribute a Session instance holds: `self.X = ...` anywhere in the class, and its properties."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Session")
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
            names.add(node.name)
    return names


def _mentions_session_type(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    return any((isinstance(n, ast.Name) and n.id == "Session") or
               (isinstance(n, ast.Constant) and isinstance(n.value, str) and "Session" in n.value.split(" | "))
               for n in ast.walk(annotation))


def _is_container(node: ast.expr) -> bool:
    """`sessions`, `x.sessions`, `x.handed_off`, or one of those wrapped in list(...) / .values() / .items()."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "sorted") and node.args:
            return _is_container(node.args[0])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("values", "items"):
            return _is_container(node.func.value)
        return False
    if isinstance(node, ast.Name):
        return node.id in _CONTAINERS
    return isinstance(node, ast.Attribute) and node.attr in _CONTAINERS


def _yields_session(node: ast.expr) -> bool:
    """An expression whose value is a Session (or None)."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "Session":
            return True
        return isinstance(func, ast.Attribute) and func.attr in _TAKE and _is_container(func.value)
    if isinstance(node, ast.Subscript):
        return _is_container(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr in ("session", "_session")
    return False


def _session_names(func: ast.AST) -> set[str]:
    names = {"session"}
    for node in ast.walk(func):
        if isinstance(node, ast.arg) and _mentions_session_type(node.annotation):
            names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                _mentions_session_type(node.annotation):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign | ast.NamedExpr) and _yields_session(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.For | ast.comprehension) and _is_container(node.iter):
            target = node.target
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:  # (sid, session) over .items()
                target = target.elts[1]
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def _session_attribute_of(node: ast.expr, names: set[str], attributes: set[str]) -> str | None:
    """For a write target like `s.job`, `s.record.state`, `s.ops[0]`: the Session attribute it writes."""
    chain: list[str] = []
    while True:
        while isinstance(node, ast.Subscript) and not _is_container(node.value):
            node = node.value
        if not isinstance(node, ast.Attribute):
            return None
        chain.append(node.attr)
        node = node.value
        is_session = (isinstance(node, ast.Name) and node.id in names) or _yields_session(node)
        if is_session and chain[-1] in attributes:
            return ".".join(reversed(chain))


def writes_outside(module: str, source: str, attributes: set[str]) -> Iterator[str]:
    """`module:line: attribute` for each Session attribute `source` writes."""
    tree = ast.parse(source)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] or [tree]
    seen: set[tuple[int, str]] = set()
    found: list[tuple[int, str]] = []
    for scope in scopes:
        names = _session_names(scope)
        for node in ast.walk(scope):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in _MUTATORS and isinstance(node.func.value, ast.Attribute):
                targets = [node.func.value]
            flat: list[ast.expr] = []
            for target in targets:
                flat.extend(target.elts if isinstance(target, ast.Tuple | ast.List) else [target])
            for target in flat:
                written = _session_attribute_of(target, names, attributes)
                if written is not None and (node.lineno, written) not in seen:
                    seen.add((node.lineno, written))
                    found.append((node.lineno, written))
    for line, written in sorted(found):
        yield f"{module}:{line}: {written}"


def _all_writes() -> list[str]:
    attributes = session_attributes(_SESSION_MODULE.read_text())
    out: list[str] = []
    for module, source in sorted(module_sources().items()):
        if module == _OWNER or module.startswith(_OWNER + "."):
            continue
        out.extend(writes_outside(module, source, attributes))
    return out


def test_no_code_outside_the_session_package_writes_session_state() -> None:
    assert _all_writes() == []


def test_the_session_attributes_are_read_from_the_class() -> None:
    attributes = session_attributes(_SESSION_MODULE.read_text())
    assert {"job", "segment", "ops", "paused", "prompt", "lead_override", "record", "connection", "state"} <= attributes


def test_the_check_sees_each_kind_of_write() -> None:
    source = '''
def a(session):
    session.job = None
def b(s: Session):
    s.paused = True
    s.record.state = "created"
def c(daemon):
    failed = daemon.sessions.get("x")
    failed.ops.append(1)
    daemon.sessions["y"].prompt = "p"
def d(sessions):
    for sid, live in sessions.items():
        live.lead_override = None
    for one in list(sessions.values()):
        one.chunks_done += 1
def e(port):
    port._session.segment = None
    del port._session.fault
def f(record, job, daemon):
    record.state = "created"
    job.chunk_index = 3
    daemon.sessions = {}
    daemon.sessions.get("x").on_sent(None)
'''
    attributes = {"job", "paused", "record", "ops", "prompt", "lead_override", "chunks_done", "segment", "fault",
                  "state"}
    found = [line.split(": ", 1)[1] for line in writes_outside("fleet.example", source, attributes)]
    assert found == ["job", "paused", "record.state", "ops", "prompt", "lead_override", "chunks_done", "segment",
                     "fault"]
    assert [w.split(": ", 1)[1] for w in writes_outside("sessiond.x", "def g(session):\n    session.job = 1\n",
                                                         attributes)] == ["job"]
