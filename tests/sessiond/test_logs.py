"""Log lines: lifecycle lines as JSON, tokens never in a line."""

from __future__ import annotations

import json
import logging

from sessiond.logs import JsonFormatter, RedactTokens


def test_lifecycle_lines_are_json_and_never_carry_a_token() -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord("sessiond.session.lifecycle", logging.INFO, __file__, 1, "attached %s", ("s_1",), None)
    record.session_id = "s_1"
    line = json.loads(formatter.format(record))
    assert (line["msg"], line["session_id"], line["level"]) == ("attached s_1", "s_1", "info")
    leaky = logging.LogRecord("uvicorn", logging.INFO, __file__, 1, "GET /v1/sessions/s_1/ws?media=raw&token=%s",
                              ("SECRET123",), None)
    RedactTokens().filter(leaky)
    assert leaky.getMessage() == "GET /v1/sessions/s_1/ws?media=raw&token=<redacted>"
    bearer = logging.LogRecord("x", logging.INFO, __file__, 1, "Authorization: Bearer SECRET123", None, None)
    RedactTokens().filter(bearer)
    assert "SECRET123" not in bearer.getMessage()
