"""Continuation snapshots as safetensors bytes: context latents + actions per chunk, JSON metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from engine.errors import SessionStateError
from engine.session import ChunkRecord

__all__ = ["SNAPSHOT_FORMAT", "Snapshot", "decode_snapshot", "encode_snapshot"]

SNAPSHOT_FORMAT = "sessiond-engine-snapshot/1"


@dataclass
class Snapshot:
    model: str
    seed: int
    next_chunk: int
    delivered: int
    records: list[ChunkRecord]


def encode_snapshot(snapshot: Snapshot) -> bytes:
    tensors: dict[str, torch.Tensor] = {}
    prompts: dict[str, str] = {}
    for record in snapshot.records:
        tensors[f"latents.{record.index}"] = record.latents.detach().to("cpu", torch.float32).contiguous()
        tensors[f"actions.{record.index}"] = record.actions.detach().to("cpu", torch.float32).contiguous()
        prompts[str(record.index)] = record.prompt
    meta = {
        "format": SNAPSHOT_FORMAT,
        "model": snapshot.model,
        "seed": snapshot.seed,
        "next_chunk": snapshot.next_chunk,
        "delivered": snapshot.delivered,
        "prompts": prompts,
    }
    return save(tensors, metadata={"sessiond": json.dumps(meta)})


def _read_header_meta(data: bytes) -> dict[str, object]:
    if len(data) < 8:
        raise SessionStateError("bad_snapshot", "snapshot is too short to be safetensors")
    size = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8 : 8 + size])
        return dict(json.loads(header["__metadata__"]["sessiond"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionStateError("bad_snapshot", f"snapshot metadata unreadable: {exc}") from exc


def decode_snapshot(data: bytes) -> Snapshot:
    meta = _read_header_meta(data)
    if meta.get("format") != SNAPSHOT_FORMAT:
        raise SessionStateError("bad_snapshot", f"snapshot format {meta.get('format')!r} is not {SNAPSHOT_FORMAT}")
    try:
        tensors = load(data)
        prompts = dict(meta["prompts"])  # type: ignore[call-overload]
        records = [
            ChunkRecord(int(i), tensors[f"latents.{i}"], tensors[f"actions.{i}"], str(p)) for i, p in prompts.items()
        ]
        return Snapshot(
            model=str(meta["model"]),
            seed=int(meta["seed"]),  # type: ignore[call-overload]
            next_chunk=int(meta["next_chunk"]),  # type: ignore[call-overload]
            delivered=int(meta["delivered"]),  # type: ignore[call-overload]
            records=sorted(records, key=lambda r: r.index),
        )
    except (SafetensorError, KeyError, ValueError, TypeError) as exc:
        raise SessionStateError("bad_snapshot", f"snapshot content unreadable: {exc}") from exc
