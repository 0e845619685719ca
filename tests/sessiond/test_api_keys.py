"""API keys for session creation: hashed at rest (the file never holds a key), compared in
constant time against every stored hash, 401 `unauthorized` for a missing or wrong key, 429
`rate_limited` over a key's concurrent sessions; off by default."""

from __future__ import annotations

import hashlib
import json
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from protocols.errors import ErrorCode, ProtocolError
from sessiond import api_keys
from sessiond.api_keys import ApiKeys, add_key, read_keys
from sessiond.errors import ServeConfigError
from tests.conftest import ROOT, off_loop, running_daemon


def test_the_file_holds_only_the_hash_of_each_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    first = add_key(path, "alice", 2)
    second = add_key(path, "bob", 1)
    text = path.read_text()
    assert first not in text and second not in text
    assert first[len("sk_"):] not in text  # not even the random part
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines == [
        {"name": "alice", "sha256": hashlib.sha256(first.encode()).hexdigest(), "max_sessions": 2},
        {"name": "bob", "sha256": hashlib.sha256(second.encode()).hexdigest(), "max_sessions": 1},
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first) == len("sk_") + 43  # 256 random bits, url-safe base64


def test_the_command_prints_the_key_once_and_stores_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    out = subprocess.run([sys.executable, "-m", "sessiond.cli", "api-key", "add", "--file", str(path), "--name", "ci",
                          "--max-sessions", "3"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    key = out.strip()
    assert key.startswith("sk_") and key not in path.read_text()
    assert ApiKeys.load(str(path)).check(key).max_sessions == 3


def test_bad_files_fail_naming_the_line_and_what_to_change(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    path.write_text('{"name": "a", "sha256": "' + "0" * 64 + '", "max_sessions": 1}\n{"name": "b", "key": "sk_x"}\n')
    with pytest.raises(ServeConfigError, match=r"line 2: `sha256` must be 64 lowercase hex digits"):
        read_keys(path)
    add_key(tmp_path / "k2", "a", 1)
    with pytest.raises(ServeConfigError, match="already has a key named 'a'"):
        add_key(tmp_path / "k2", "a", 1)


def test_missing_and_wrong_keys_are_unauthorized(tmp_path: Path) -> None:
    key = add_key(tmp_path / "k", "alice", 1)
    keys = ApiKeys.load(str(tmp_path / "k"))
    for presented in (None, "", "sk_wrong", key + "x", hashlib.sha256(key.encode()).hexdigest()):
        with pytest.raises(ProtocolError) as caught:
            keys.check(presented)
        assert caught.value.code == ErrorCode.UNAUTHORIZED
    assert keys.check(key).name == "alice"


def test_every_stored_hash_is_compared_in_constant_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "k"
    first = add_key(path, "a", 1)
    for name in ("b", "c", "d"):
        add_key(path, name, 1)
    keys = ApiKeys.load(str(path))
    compared: list[tuple[str, str]] = []

    def compare_digest(a: str, b: str) -> bool:
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(api_keys.hmac, "compare_digest", compare_digest)
    assert keys.check(first).name == "a"  # the first key matches: the other three are compared all the same
    assert [b for _, b in compared] == [k.sha256 for k in keys.keys]
    compared.clear()
    with pytest.raises(ProtocolError):
        keys.check("sk_nobody")
    assert len(compared) == 4


def test_a_key_holds_at_most_its_sessions(tmp_path: Path) -> None:
    key = add_key(tmp_path / "k", "alice", 2)
    keys = ApiKeys.load(str(tmp_path / "k"))
    alice = keys.check(key)
    keys.claim(alice, "s_1")
    keys.claim(alice, "s_2")
    with pytest.raises(ProtocolError) as caught:
        keys.claim(alice, "s_3")
    assert caught.value.code == ErrorCode.RATE_LIMITED and "2 of its 2 sessions" in caught.value.message
    keys.release("s_1")
    keys.claim(alice, "s_3")
    keys.claim(alice, "s_4", force=True)  # a resumed session counts whatever the count
    assert keys.holding("alice") == 3


async def test_session_creation_over_http_needs_a_key_within_its_quota(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    key = add_key(path, "alice", 2)
    async with off_loop(running_daemon(api_keys=str(path))) as d, httpx.AsyncClient(timeout=30) as http:
        create = f"{d.url}/v1/sessions"
        body = {"mode": "director"}
        for headers in ({}, {"X-API-Key": "sk_wrong"}, {"Authorization": f"Bearer {key}"}):
            refused = await http.post(create, json=body, headers=headers)
            assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
        assert "X-API-Key" in (await http.post(create, json=body)).json()["error"]["message"]
        made = []
        for _ in range(2):
            response = await http.post(create, json=body, headers={"X-API-Key": key})
            assert response.status_code == 201
            made.append(response.json())
        over = await http.post(create, json=body, headers={"X-API-Key": key})
        assert (over.status_code, over.json()["error"]["code"]) == (429, "rate_limited")
        first = made[0]
        gone = await http.delete(f"{create}/{first['session_id']}", headers={"Authorization": f"Bearer {first['token']}"})
        assert gone.status_code == 204
        again = await http.post(create, json=body, headers={"X-API-Key": key})
        assert again.status_code == 201
        # the session token, not the API key, authorizes the session's own endpoints
        status = await http.get(f"{create}/{again.json()['session_id']}", headers={"X-API-Key": key})
        assert status.status_code == 401
