"""What a model built on a transformers model offers `export-pretrained`."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Union, runtime_checkable


@runtime_checkable
class SavesPretrained(Protocol):
    """A model that writes the transformers model inside it as a `save_pretrained` directory.

    `huggingface`, `transformer_classifier` and `seq2seq_generator` are; a plugin's model becomes
    exportable by giving these two members.
    """

    @property
    def pretrained_auto_class(self) -> str:
        """The name of the transformers class whose `from_pretrained` loads the directory
        (`AutoModelForSequenceClassification`, `EncoderDecoderModel`, ...)."""
        ...

    def save_pretrained(self, directory: Union[str, Path]) -> None:
        """Write the transformers model (weights, config and any generation config) into `directory`."""
        ...
