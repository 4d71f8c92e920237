"""Reads what an offline W&B run wrote: the records of its `run-<id>.wandb` file.

The file is W&B's transaction log (what `wandb sync` uploads): a 7-byte header (":W&B", a magic
number, a version), then the LevelDB log format: 32 KiB blocks of chunks, each with a 7-byte
header (checksum, little-endian length, type: 1 full, 2 first, 3 middle, 4 last); a block's tail
shorter than a header is padding. Each whole record is a `wandb_internal_pb2.Record` (W&B's own
protobuf). wandb no longer ships a Python reader for it, so the tests read it here.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_HEADER = 7
BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def raw_records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    records, parts, pos = [], [], FILE_HEADER
    while pos + CHUNK_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # padding to the next block
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + CHUNK_HEADER])
        if kind == 0 and length == 0:  # zero fill: the rest of the block is empty
            pos += left
            continue
        parts.append(data[pos + CHUNK_HEADER:pos + CHUNK_HEADER + length])
        pos += CHUNK_HEADER + length
        if kind in (FULL, LAST):
            records.append(b"".join(parts))
            parts = []
    return records


@dataclass
class OfflineRun:
    run_id: str = ""
    project: str = ""
    group: str = ""
    name: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)  # one dict per logged row
    config: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    exit_code: int | None = None


def read_offline_run(path: Path) -> OfflineRun:
    from wandb.proto import wandb_internal_pb2

    run = OfflineRun()
    for raw in raw_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            # wandb may write a later run record that repeats only some fields (seen once in a loaded CI
            # run: the project and id read back empty); a field keeps the last value that was set
            r = record.run
            run.run_id, run.project = r.run_id or run.run_id, r.project or run.project
            run.group, run.name = r.run_group or run.group, r.display_name or run.name
        elif kind == "history":
            run.history.append({_key(item): json.loads(item.value_json) for item in record.history.item})
        elif kind == "config":
            run.config.update({_key(item): json.loads(item.value_json) for item in record.config.update})
        elif kind == "files":
            run.files += [f.path for f in record.files.files]
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)
