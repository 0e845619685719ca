"""Log levels: the daemon's own lines at info, aiortc / aioice / av at warning by default;
`sessiond serve --log-level` sets every logger."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from sessiond.api.server import config_from_args
from sessiond.cli import build_parser
from sessiond.config import ServeConfig
from sessiond.errors import ServeConfigError
from sessiond.logs import QUIET_LOGGERS, configure_logging

_NAMES = ("", *QUIET_LOGGERS)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = {name: logging.getLogger(name).level for name in _NAMES}
    handlers = root.handlers[:]
    yield
    root.handlers[:] = handlers
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def _levels() -> dict[str, int]:
    return {name or "root": logging.getLogger(name).level for name in _NAMES}


def test_by_default_ours_log_info_and_the_webrtc_libraries_only_warnings() -> None:
    configure_logging(False)
    assert _levels() == {"root": logging.INFO, "aiortc": logging.WARNING, "aioice": logging.WARNING,
                         "av": logging.WARNING}
    assert logging.getLogger("sessiond.session.lifecycle").isEnabledFor(logging.INFO)
    assert not logging.getLogger("aioice.ice").isEnabledFor(logging.INFO)
    assert logging.getLogger("aiortc.rtcpeerconnection").isEnabledFor(logging.WARNING)


@pytest.mark.parametrize(("flag", "level"), [("debug", logging.DEBUG), ("info", logging.INFO),
                                             ("warning", logging.WARNING)])
def test_log_level_sets_every_logger(flag: str, level: int) -> None:
    config = config_from_args(build_parser().parse_args(["serve", "--log-level", flag]))
    assert config.log_level == flag
    configure_logging(config.log_json, config.log_level)
    assert _levels() == {"root": level, "aiortc": level, "aioice": level, "av": level}


def test_an_unknown_log_level_is_refused_naming_the_choices() -> None:
    with pytest.raises(ServeConfigError, match=r"config option `log_level`: must be one of debug, info, warning, got 'loud'"):
        ServeConfig(log_level="loud")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--log-level", "loud"])
