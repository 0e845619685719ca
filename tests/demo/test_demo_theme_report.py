"""The long play's theme numbers (`theme_report`): accuracy over the chunks after each prompt change,
and what each change's missed frames were read as."""

from __future__ import annotations

import numpy as np

from demo._long_play_stats import theme_report
from demo.script import PlayScript


class _Reads:
    """A stand-in classifier: frame i is read as the i-th name given."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def predict(self, frames: np.ndarray) -> list[str]:
        assert len(frames) == len(self.names)
        return list(self.names)


def test_each_change_says_its_accuracy_and_what_its_misses_were_read_as() -> None:
    # 2 frames a chunk; chunk 0 is context; desert from chunk 2, snow from chunk 4; 2 chunks scored a change
    prompts = ["a meadow", "a meadow", "a desert", "a desert", "snow", "snow"]
    script = PlayScript(actions=[], prompts=prompts, segments=[], changes=[2, 4])
    reads = ["meadow", "meadow",  # chunk 1
             "meadow", "autumn", "desert", "desert",  # chunks 2-3: half read as desert
             "snow", "snow", "snow", "night"]  # chunks 4-5
    report = theme_report(np.zeros((10, 1, 1, 3), np.uint8), _Reads(reads), script, context_chunks=1,
                          theme_chunks=2, fpc=2)
    assert report["by_change"] == [
        {"chunk": 2, "theme": "desert", "accuracy": 0.5, "misread_as": {"autumn": 1, "meadow": 1}},
        {"chunk": 4, "theme": "snow", "accuracy": 0.75, "misread_as": {"night": 1}},
    ]
    assert report["after_change"] == 5 / 8
    assert report["all_frames"] == 7 / 10
