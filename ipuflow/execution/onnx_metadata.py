"""What `ipuflow export` records in an ONNX file (metadata_props) and reads back at inference."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Union

import torch

METADATA_KEY = "ipuflow"
"""The metadata_props key holding the JSON record below."""

Dimension = Union[int, str]
"""A fixed size, or the name of a dynamic axis ("batch", "sequence")."""


@dataclass
class OnnxInput:
    """One graph input: a batch key, its dtype and shape; `optional` inputs (a forward argument with a
    default, such as `label`) are filled with `fill` when a batch lacks them (prediction)."""

    name: str
    dtype: str
    shape: List[Dimension]
    optional: bool = False
    fill: Optional[int] = None


@dataclass
class OnnxRecord:
    """The export's record: inputs, outputs, opset, dynamic axes, the weights it was exported from."""

    inputs: List[OnnxInput]
    outputs: List[str]
    opset: int
    dynamic: bool
    weights_sha256: str
    exporter: str
    ipuflow_version: str
    torch_version: str
    parity: Dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The record as JSON text."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "OnnxRecord":
        """Read what `to_json` wrote."""
        raw = json.loads(text)
        raw["inputs"] = [OnnxInput(**item) for item in raw["inputs"]]
        return cls(**raw)


def weights_digest(model: torch.nn.Module) -> str:
    """A SHA-256 over the model's state (names, dtypes, shapes, bytes), so that an ONNX file can be
    matched to the archive it was exported from."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{value.dtype}:{tuple(value.shape)}".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()


def read_record(model_file: str) -> OnnxRecord:
    """The ipuflow record of an exported ONNX file (an error if the file was not exported by ipuflow)."""
    import onnx

    from ipuflow.config import ConfigurationError

    try:
        proto = onnx.load(model_file, load_external_data=False)
    except Exception as error:
        raise ConfigurationError(f"{model_file}: cannot read it as an ONNX model ({error}).") from None
    for prop in proto.metadata_props:
        if prop.key == METADATA_KEY:
            return OnnxRecord.from_json(prop.value)
    raise ConfigurationError(
        f"{model_file} holds no ipuflow record: export the model with `ipuflow export ARCHIVE -o {model_file}`."
    )
