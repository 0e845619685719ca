"""Engine core: a causal chunked world model stepped by the caller. Imports nothing of ours."""

from engine.api import (
    ActionSpace,
    ChunkFrames,
    EngineProtocol,
    FrameAction,
    ItemResult,
    KVStats,
    ModelInfo,
    Phase,
    StepItem,
    StepPlan,
    StepResult,
)

__all__ = [
    "ActionSpace",
    "ChunkFrames",
    "EngineProtocol",
    "FrameAction",
    "ItemResult",
    "KVStats",
    "ModelInfo",
    "Phase",
    "StepItem",
    "StepPlan",
    "StepResult",
]
