"""The `huggingface` reader: local Hugging Face datasets (save_to_disk directories, or parquet,
JSON-lines and CSV files through `load_dataset`), offline."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, ClassVar, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.requirements import PackageRequirement
from ipuflow.data.columnar import FieldBatch, file_identity
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import RECORDS_PER_BATCH, DatasetReader
from ipuflow.data.readers.labels import check_label
from ipuflow.data.readers.text_classification_json import (
    TextRecord,
    text_classification_batches,
    text_classification_instance,
)
from ipuflow.data.tokenizers import Tokenizer, WhitespaceTokenizer

logger = logging.getLogger(__name__)

SPLIT_SEPARATOR = "#"
"""`data/nli#validation`: the split of the dataset at `data/nli` (wins over `split`)."""
FILE_FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv"}


def import_datasets_offline() -> Any:
    """The `datasets` module, set to never reach the Hugging Face hub."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise ConfigurationError(
            "the huggingface reader needs the `datasets` package: pip install 'ipuflow[hf]'.", key="type"
        ) from None
    datasets.disable_progress_bars()
    return datasets


@DatasetReader.register("huggingface")
class HuggingfaceDatasetReader(DatasetReader):
    """Reads a local Hugging Face dataset: a directory written by `save_to_disk` (a `Dataset`, or
    a `DatasetDict` whose `split` is taken), or a parquet, JSON(-lines) or CSV file read through
    `load_dataset`. A data path may name its split after a `#` (`data/nli#validation`), and
    `split` may slice (`train[:10%]`).

    Columns are mapped by `text_column`, `text_pair_column` (a second text, into the field
    `tokens_pair`) and `label_column` (absent: unlabelled); a `ClassLabel` column gives its class
    names to the vocabulary, and rows labelled -1 (no gold label) are skipped. `streaming: true`
    reads files as an `IterableDataset`, so `datasets` writes no Arrow copy of them (for data larger
    than the disk cache); only the tokenized columns are kept. Nothing is downloaded: a path that is
    not local is an error.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (PackageRequirement("datasets", "datasets", "hf"),)

    def __init__(
        self,
        tokenizer: Tokenizer = WhitespaceTokenizer(),
        text_column: str = "text",
        text_pair_column: Optional[str] = None,
        label_column: Optional[str] = "label",
        split: Optional[str] = None,
        streaming: bool = False,
        max_tokens: Optional[int] = None,
        label_namespace: str = "labels",
        keep_text: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        validators.positive_int("max_tokens", max_tokens, optional=True)
        self.tokenizer = tokenizer
        self.text_column = text_column
        self.text_pair_column = text_pair_column
        self.label_column = label_column
        self.split = split
        self.streaming = streaming
        self.max_tokens = max_tokens
        self.label_namespace = label_namespace
        self.keep_text = keep_text

    # --------------------------------------------------------------------------- the source

    def _location(self, path: Union[str, Path]) -> Tuple[Path, Optional[str]]:
        text = str(path)
        split = self.split
        if not Path(text).expanduser().exists() and SPLIT_SEPARATOR in text:
            text, split = text.rsplit(SPLIT_SEPARATOR, 1)
        location = Path(text).expanduser()
        if not location.exists():
            raise ConfigurationError(
                f"Data path {str(path)!r}: no local file or directory {str(location.resolve())!r}. The huggingface "
                "reader reads local data only and never downloads from the hub: save a dataset with save_to_disk, "
                "or give its parquet, JSON-lines or CSV files."
            )
        return location, split

    def _data_file(self, path: Union[str, Path]) -> Path:
        self._location(path)  # checks that the data is local
        return Path(str(path)).expanduser()

    def source_identity(self, path: Path) -> Any:
        """The identity of every file of the dataset, and the split."""
        location, split = self._location(path)
        files = sorted(location.rglob("*")) if location.is_dir() else [location]
        return {
            "split": split,
            "files": {str(file.relative_to(location) if location.is_dir() else file.name): file_identity(file)
                      for file in files if file.is_file()},
        }

    def _open(self, path: Path) -> Tuple[Any, Optional[List[str]]]:
        """The dataset (a `Dataset` or `IterableDataset`) and the label column's class names."""
        datasets = import_datasets_offline()
        location, split = self._location(path)
        if location.is_dir():
            try:
                data = datasets.load_from_disk(str(location))
            except FileNotFoundError as error:
                raise ConfigurationError(f"Data path {str(location)!r}: not a dataset saved with save_to_disk ({error}).") from None
            if isinstance(data, datasets.DatasetDict):
                chosen = split or ("train" if "train" in data else None)
                if chosen not in data:
                    raise ConfigurationError(
                        f"the dataset at {str(location)!r} has splits {sorted(data)}; found {chosen!r}. Name one "
                        "with split or a '#split' suffix on the path.",
                        key="split",
                    )
                data = data[chosen]
        else:
            kind = FILE_FORMATS.get(location.suffix.lower())
            if kind is None:
                raise ConfigurationError(
                    f"Data path {str(location)!r}: expected a save_to_disk directory or a file ending in "
                    f"{sorted(FILE_FORMATS)}."
                )
            options = {"delimiter": "\t"} if location.suffix.lower() == ".tsv" else {}
            data = datasets.load_dataset(kind, data_files=str(location), split=split or "train", streaming=self.streaming, **options)
        features = getattr(data, "features", None) or {}
        label_feature = features.get(self.label_column) if self.label_column else None
        names = list(label_feature.names) if isinstance(label_feature, datasets.ClassLabel) else None
        columns = getattr(data, "column_names", None)
        if columns is not None:
            wanted = [column for column in (self.text_column, self.text_pair_column) if column]
            missing = [column for column in wanted if column not in columns]
            if missing:
                raise ConfigurationError(
                    f"the dataset at {str(location)!r} has no column {missing[0]!r} (columns: {columns}).",
                    key="text_column",
                )
        return data, names

    # ------------------------------------------------------------------------------ records

    def _records(self, path: Path) -> Iterator[TextRecord]:
        data, names = self._open(path)
        columns = [column for column in (self.text_column, self.text_pair_column, self.label_column) if column]
        present = getattr(data, "column_names", None)
        if present is not None:
            columns = [column for column in columns if column in present]
            if self.label_column and self.label_column not in present:
                logger.warning("%s has no %r column: its instances have no labels.", path, self.label_column)
        skipped = 0
        for batch in data.select_columns(columns).iter(batch_size=RECORDS_PER_BATCH):
            texts = batch[self.text_column]
            pairs = batch[self.text_pair_column] if self.text_pair_column else [None] * len(texts)
            labels = batch.get(self.label_column) if self.label_column else None
            if labels is None:
                labels = [None] * len(texts)
            elif names is not None:
                kept = [position for position, label in enumerate(labels) if label is not None and label >= 0]
                skipped += len(labels) - len(kept)
                if len(kept) < len(labels):
                    texts, pairs, labels = [texts[p] for p in kept], [pairs[p] for p in kept], [labels[p] for p in kept]
                labels = [names[label] for label in labels]
            for text, pair, label in zip(texts, pairs, labels):
                if type(text) is not str or (self.text_pair_column and type(pair) is not str):
                    raise ConfigurationError(f"{path}: the text columns must hold strings, found {text!r} / {pair!r}.")
                yield text, pair, check_label(label, str(path), self.label_column or "") if label is not None else None
        if skipped:
            logger.info("Skipped %d rows of %s labelled -1 (no gold label)", skipped, path)

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """Batches of rows, each tokenized with one batched tokenizer call (metadata only if `metadata`)."""
        yield from text_classification_batches(self.tokenizer, self._records(path), self.max_tokens, self.label_namespace,
                                               keep_text=metadata and self.keep_text)

    def _read(self, path: Path) -> Iterator[Instance]:
        for text, pair, label in self._records(path):
            yield self.text_to_instance(text, label, pair)

    def text_to_instance(self, text: str, label: Union[str, int, None] = None, text_pair: Optional[str] = None) -> Instance:  # type: ignore[override]
        """An instance of `text` and, if given, its `label` and second text."""
        return text_classification_instance(self.tokenizer, text, label, self.max_tokens, self.label_namespace,
                                            self.keep_text, text_pair)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{text_column: ..., text_pair_column: ..., label_column: ...}` (the label optional)."""
        values = []
        for column in (self.text_column, self.text_pair_column):
            value = obj.get(column) if column else None
            if column and not isinstance(value, str):
                raise ConfigurationError(f"JSON input: expected a string under {column!r}, found {value!r} (keys: {sorted(obj)}).")
            values.append(value)
        label = (check_label(obj[self.label_column], "JSON input", self.label_column)
                 if self.label_column is not None and self.label_column in obj else None)
        return self.text_to_instance(values[0], label, values[1])  # type: ignore[arg-type]  # checked to be str above
