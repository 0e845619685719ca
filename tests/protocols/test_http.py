"""HTTP JSON bodies: create request/response, session status, error body, status codes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocols.errors import ErrorCode, ProtocolError, Refused
from protocols.http import (
    CreateSessionRequest,
    CreateSessionResponse,
    ErrorBody,
    SessionStatus,
    http_status_for,
    ws_close_code_for,
)

RESPONSE = CreateSessionResponse(
    session_id="s-1",
    token="t" * 43,
    mode="world",
    model="tiny",
    width=64,
    height=48,
    fps=30,
    action_space={"keys": ["w", "a"], "mouse": True, "buttons": 0, "axes": 0},
    ws_url="/v1/sessions/s-1/ws",
    webrtc_url="/v1/sessions/s-1/webrtc",
)
STATUS = SessionStatus(
    session_id="s-1",
    mode="director",
    state="idle",
    frames_sent=90,
    pts=270000,
    segment=2,
    created_at=1764420000.25,
    last_active_at=1764420010.5,
)


def rejected(obj: Any, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        CreateSessionRequest.from_json(obj, **kwargs)
    return info.value


def test_a_create_body_with_only_a_mode_is_valid() -> None:
    assert CreateSessionRequest.from_json({"mode": "director"}) == CreateSessionRequest(mode="director")


def test_a_full_create_body_round_trips_through_json_text() -> None:
    req = CreateSessionRequest(
        mode="world", model="demo", prompt="a forest", seed=7, width=640, height=352, fps=30
    )
    assert CreateSessionRequest.from_json(json.loads(json.dumps(req.to_json()))) == req


def test_create_to_json_leaves_out_unset_fields() -> None:
    assert CreateSessionRequest(mode="world", seed=3).to_json() == {"mode": "world", "seed": 3}


@pytest.mark.parametrize("obj", [[], "world", None, 3], ids=["array", "string", "null", "number"])
def test_a_create_body_that_is_not_an_object_is_a_bad_message(obj: Any) -> None:
    err = rejected(obj)
    assert (err.code, err.field) == (ErrorCode.BAD_MESSAGE, None)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({}, "mode"),
        ({"mode": "game"}, "mode"),
        ({"mode": 1}, "mode"),
        ({"mode": "world", "model": ""}, "model"),
        ({"mode": "world", "prompt": 5}, "prompt"),
        ({"mode": "world", "seed": "7"}, "seed"),
        ({"mode": "world", "seed": -1}, "seed"),
        ({"mode": "world", "seed": True}, "seed"),
        ({"mode": "world", "width": 0}, "width"),
        ({"mode": "world", "height": 640.0}, "height"),
        ({"mode": "world", "fps": 241}, "fps"),
    ],
    ids=[
        "missing_mode",
        "unknown_mode",
        "numeric_mode",
        "empty_model",
        "numeric_prompt",
        "string_seed",
        "negative_seed",
        "bool_seed",
        "zero_width",
        "float_height",
        "fps_over_240",
    ],
)
def test_an_invalid_create_field_is_named(obj: dict[str, Any], field: str) -> None:
    err = rejected(obj)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, field)


def test_a_create_prompt_over_the_limit_is_invalid() -> None:
    err = rejected({"mode": "director", "prompt": "x" * 11}, max_prompt_chars=10)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "prompt")


def test_create_response_round_trips_and_its_public_form_has_no_token() -> None:
    assert CreateSessionResponse.from_json(json.loads(json.dumps(RESPONSE.to_json()))) == RESPONSE
    public = RESPONSE.public_json()
    assert "token" not in public
    assert public == {k: v for k, v in RESPONSE.to_json().items() if k != "token"}


def test_create_response_prompt_examples_are_optional_and_travel_as_a_list() -> None:
    assert "prompt_examples" not in RESPONSE.to_json()
    with_examples = CreateSessionResponse.from_json({**RESPONSE.to_json(), "prompt_examples": ["a snowy day", "dunes"]})
    assert with_examples.prompt_examples == ("a snowy day", "dunes")
    assert with_examples.public_json()["prompt_examples"] == ["a snowy day", "dunes"]
    with pytest.raises(ProtocolError) as info:
        CreateSessionResponse.from_json({**RESPONSE.to_json(), "prompt_examples": ["ok", 3]})
    assert (info.value.code, info.value.field) == (ErrorCode.INVALID_FIELD, "prompt_examples")


def test_a_create_response_missing_its_ws_url_is_invalid() -> None:
    obj = {k: v for k, v in RESPONSE.to_json().items() if k != "ws_url"}
    with pytest.raises(ProtocolError) as info:
        CreateSessionResponse.from_json(obj)
    assert (info.value.code, info.value.field) == (ErrorCode.INVALID_FIELD, "ws_url")


def test_session_status_round_trips_and_accepts_integer_times() -> None:
    assert SessionStatus.from_json(json.loads(json.dumps(STATUS.to_json()))) == STATUS
    obj = {**STATUS.to_json(), "created_at": 1764420000}
    assert SessionStatus.from_json(obj).created_at == 1764420000.0


def test_error_body_has_the_protocol_shape_and_round_trips() -> None:
    body = ErrorBody(code="capacity", message="the GPU is full", retry_after_s=2.5)
    assert body.to_json() == {
        "error": {"code": "capacity", "message": "the GPU is full", "retry_after_s": 2.5}
    }
    assert ErrorBody.from_json(body.to_json()) == body


def test_a_refusal_names_its_reason_in_one_word_and_old_bodies_without_it_still_parse() -> None:
    body = ErrorBody(code="capacity", message="not ready: the engine is warming up; retry shortly",
                     retry_after_s=1.0, reason="not_ready")
    assert body.to_json()["error"]["reason"] == "not_ready"
    assert ErrorBody.from_json(body.to_json()) == body
    assert ErrorBody.from_json({"error": {"code": "capacity", "message": "full"}}).reason is None
    assert ErrorBody.from_json({"error": {"code": "capacity", "message": "m", "reason": "a_future_word"}}).reason == (
        "a_future_word")  # clients accept words not in the list


def test_the_body_of_a_raised_refusal_carries_its_retry_after_and_reason() -> None:
    body = ErrorBody.of(Refused(ErrorCode.CAPACITY, "the KV pool is full", 5, "kv"))
    assert body.to_json() == {"error": {"code": "capacity", "message": "the KV pool is full",
                                        "retry_after_s": 5.0, "reason": "kv"}}
    assert ErrorBody.of(ProtocolError(ErrorCode.NOT_FOUND, "no session x")).to_json() == {
        "error": {"code": "not_found", "message": "no session x"}}


def test_error_body_from_a_protocol_error_keeps_code_message_and_field() -> None:
    body = ErrorBody.from_error(ProtocolError(ErrorCode.INVALID_FIELD, "`fps` must be in [1, 240]", "fps"))
    assert body.to_json() == {
        "error": {"code": "invalid_field", "message": "`fps` must be in [1, 240]", "field": "fps"}
    }
    assert body.status() == 400


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"code": "x"}, "error"),
        ({"error": {"message": "m"}}, "error.code"),
        ({"error": {"code": "capacity", "message": "m", "retry_after_s": -1}}, "error.retry_after_s"),
    ],
)
def test_an_invalid_error_body_is_named(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        ErrorBody.from_json(obj)
    assert (info.value.code, info.value.field) == (ErrorCode.INVALID_FIELD, field)


EXPECTED_STATUS = {
    "bad_message": 400,
    "unknown_type": 400,
    "invalid_field": 400,
    "too_large": 400,
    "unsupported_version": 400,
    "unauthorized": 401, "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "rate_limited": 429,
    "internal": 500,
    "engine_fault": 500,
    "capacity": 503,
    "store_unavailable": 503,
}


def test_every_error_code_has_its_http_status() -> None:
    assert {code.value: http_status_for(code) for code in ErrorCode} == EXPECTED_STATUS


def test_an_unknown_code_maps_to_500() -> None:
    assert http_status_for("meltdown") == 500


def test_websocket_close_codes_are_4000_plus_the_http_status() -> None:
    assert (ws_close_code_for(ErrorCode.UNAUTHORIZED), ws_close_code_for("not_found")) == (4401, 4404)
