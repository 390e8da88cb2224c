"""The DatasetReader base class: data files in, instances (or a columnar dataset) out."""

from __future__ import annotations

import contextlib
import gc
import inspect
import itertools
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from ipuflow.config import ConfigurationError, Registrable, validators
from ipuflow.data.batch_transforms import BatchTransform
from ipuflow.data.columnar import ColumnarBuilder, ColumnarDataset, DataCache, FieldBatch, cached_dataset, file_identity
from ipuflow.data.columnar.builder import FORMAT_VERSION
from ipuflow.data.columnar.fingerprint import object_fingerprint
from ipuflow.data.columnar.from_instances import field_batches_from_instances
from ipuflow.data.instance import Instance

RECORDS_PER_BATCH = 8192
"""Records tokenized and written together when building a columnar dataset."""


@contextlib.contextmanager
def garbage_collection_paused() -> Iterator[None]:
    """Pause Python's cycle collector: a build makes millions of short-lived lists and strings that
    form no cycles, and the collector's passes over them cost a fifth of the build's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class DatasetReader(Registrable):
    """Reads a data file into instances. Built-ins: `text_classification_json` (the default),
    `text_classification_csv`, `tensor_classification`, `huggingface`.

    Subclasses implement `_read` (instances of a file) and `text_to_instance`; `instance_from_json`
    builds an instance from a JSON object with the same keys as the data files (the label optional),
    which is how predictors read their inputs. Errors in a file name the file and line.

    Training reads through `read_columnar`: the data is tokenized in batches straight into a
    memory-mapped columnar dataset, cached on disk (`cache_directory`, default
    `~/.cache/ipuflow/data`; `cache: false` or `ipuflow train --no-cache` builds afresh);
    `num_workers` processes parse and tokenize where a reader supports it (`text_classification_json`).
    """

    default_implementation = "text_classification_json"

    def __init__(
        self,
        max_instances: Optional[int] = None,
        cache_directory: Optional[str] = None,
        cache: bool = True,
        num_workers: int = 0,
    ) -> None:
        validators.positive_int("max_instances", max_instances, optional=True)
        validators.non_negative_int("num_workers", num_workers)
        self.max_instances = max_instances
        # Private: neither changes the data, so neither is part of the cache key.
        self._data_cache = DataCache.from_settings(cache_directory, cache)
        self._num_workers = num_workers

    def read(self, path: Union[str, Path]) -> List[Instance]:
        """The instances in the file at `path` (at most `max_instances`)."""
        file_path = self._data_file(path)
        instances: List[Instance] = []
        for instance in self._read(file_path):
            instances.append(instance)
            if self.max_instances is not None and len(instances) >= self.max_instances:
                break
        return instances

    def read_columnar(self, path: Union[str, Path], metadata: bool = False) -> ColumnarDataset:
        """The data at `path` (at most `max_instances`) as a columnar dataset, from the cache when
        the same reader settings have read the same file before. With `metadata`, metadata fields
        (raw text, record ids) are kept too, for postprocessors (`ColumnarDataset.instances`)."""
        file_path = self._data_file(path)
        key = {"format": FORMAT_VERSION, "reader": self.fingerprint(), "source": self.source_identity(file_path)}
        if metadata:
            key["metadata"] = True
        return cached_dataset(self._data_cache, key, lambda directory: self._build(file_path, directory, metadata),
                              description=str(path))

    def _data_file(self, path: Union[str, Path]) -> Path:
        file_path = Path(path).expanduser()
        if not file_path.is_file():
            problem = "is a directory" if file_path.is_dir() else "does not exist"
            raise ConfigurationError(f"Data file {str(path)!r} {problem} (resolved to {file_path.resolve()}).")
        return file_path

    def source_identity(self, path: Path) -> Any:
        """What identifies the data at `path` for the cache (by default the file's identity)."""
        return file_identity(path)

    def fingerprint(self) -> Any:
        """The reader's settings (and its tokenizer's), which the cached data depends on."""
        return object_fingerprint(self)

    def _build(self, path: Path, directory: Path, metadata: bool = False) -> None:
        builder = ColumnarBuilder(directory)
        if not metadata:
            batches = self.field_batches(path)
        elif "metadata" in inspect.signature(self.field_batches).parameters:
            batches = self.field_batches(path, metadata=True)  # type: ignore[call-arg]
        else:  # a reader whose own field_batches leaves metadata out: its instances have it
            batches = DatasetReader.field_batches(self, path, metadata=True)
        with garbage_collection_paused():
            for batch in batches:
                if self.max_instances is not None:
                    left = self.max_instances - builder.size
                    if left <= 0:
                        break
                    batch = {name: values.head(left) for name, values in batch.items()}
                builder.add(batch)
        builder.finish()

    def field_batches(self, path: Path, metadata: bool = False) -> Iterator[Dict[str, FieldBatch]]:
        """The data at `path` as batches of fields, ready for a columnar builder; metadata fields
        only if `metadata`.

        By default, batches of the instances `_read` gives; readers override this to tokenize a
        batch of records at once.
        """
        # A reader written against the older API may override only `read`.
        instances = self._read(path) if type(self)._read is not DatasetReader._read else iter(self.read(path))
        while True:
            chunk = list(itertools.islice(instances, RECORDS_PER_BATCH))
            if not chunk:
                return
            yield field_batches_from_instances(chunk, metadata)

    def batch_transform(self) -> Optional[BatchTransform]:
        """What the data loader does to every batch of this reader's data (the `language_modeling`
        reader's masking for masked LM); None by default."""
        return None

    def _read(self, path: Path) -> Iterator[Instance]:
        """The instances of the file at `path`, in order."""
        raise NotImplementedError

    def text_to_instance(self, *inputs: Any) -> Instance:
        """An instance from the raw inputs of one example (the label optional)."""
        raise NotImplementedError

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from a JSON object with the data files' keys (the label optional)."""
        raise NotImplementedError

    def instances_from_json(self, obj: Mapping[str, Any]) -> List[Instance]:
        """Every instance of a JSON object: readers that split an example into several (the windows
        of a long context) override this; by default the one `instance_from_json` gives."""
        return [self.instance_from_json(obj)]
