"""Reads the records of an offline W&B run (``run-ID.wandb``) so tests can check what was logged.

The file is W&B's transaction log: a 7-byte header (":W&B", 0xBEE1, version), then 32 KiB blocks of
records, each with a 7-byte header (CRC32, length, kind: full, first, middle, last) holding a
serialized `wandb_internal_pb2.Record`. wandb itself no longer ships a Python reader.
"""

import json
import struct
from pathlib import Path
from typing import Any, Dict, Iterator, List

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def record_payloads(path: Path) -> Iterator[bytes]:
    data = Path(path).read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:HEADER])
    assert ident == b":W&B" and magic == 0xBEE1, f"{path} is not a W&B run file"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # the rest of a block too short for a header is padding
            position += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position:position + HEADER])
        position += HEADER
        if kind == 0 and length == 0:
            position += left - HEADER
            continue
        chunk = data[position:position + length]
        position += length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""


def read_offline_run(path: Path) -> Dict[str, Any]:
    """{"run_id", "config" (key → value), "history" (rows), "artifacts" (name, type, files), "exit_code"}."""
    from wandb.proto import wandb_internal_pb2

    run: Dict[str, Any] = {"run_id": None, "config": {}, "history": [], "artifacts": [], "exit_code": None}
    for payload in record_payloads(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["run_id"] = record.run.run_id
            for item in record.run.config.update:
                run["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run["config"][item.key] = json.loads(item.value_json)
        elif kind == "history":
            run["history"].append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                                   for item in record.history.item})
        elif kind == "artifact":
            run["artifacts"].append({"name": record.artifact.name, "type": record.artifact.type,
                                     "files": [entry.path for entry in record.artifact.manifest.contents]})
        elif kind == "exit":
            run["exit_code"] = record.exit.exit_code
    return run


def offline_runs(serialization_dir: Path) -> List[Path]:
    """The run files of every offline run under ``DIR/wandb``, oldest first."""
    return sorted(Path(serialization_dir).glob("wandb/offline-run-*/run-*.wandb"))
