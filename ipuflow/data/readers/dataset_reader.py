"""The DatasetReader base class: data files in, instances out."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, List, Mapping, Optional, Union

from ipuflow.config import ConfigurationError, Registrable
from ipuflow.data.instance import Instance


class DatasetReader(Registrable):
    """Reads a data file into instances. Built-ins: `text_classification_json` (the default),
    `text_classification_csv`, `tensor_classification`.

    Subclasses implement `_read` (instances of a file) and `text_to_instance`; `instance_from_json`
    builds an instance from a JSON object with the same keys as the data files (the label optional),
    which is how predictors read their inputs. Errors in a file name the file and line.
    """

    default_implementation = "text_classification_json"

    def __init__(self, max_instances: Optional[int] = None) -> None:
        if max_instances is not None and max_instances < 1:
            raise ConfigurationError(f"dataset_reader.max_instances: expected a positive int or null, found {max_instances}.")
        self.max_instances = max_instances

    def read(self, path: Union[str, Path]) -> List[Instance]:
        """The instances in the file at `path` (at most `max_instances`)."""
        file_path = Path(path).expanduser()
        if not file_path.is_file():
            problem = "is a directory" if file_path.is_dir() else "does not exist"
            raise ConfigurationError(f"Data file {str(path)!r} {problem} (resolved to {file_path.resolve()}).")
        instances: List[Instance] = []
        for instance in self._read(file_path):
            instances.append(instance)
            if self.max_instances is not None and len(instances) >= self.max_instances:
                break
        return instances

    def _read(self, path: Path) -> Iterator[Instance]:
        """The instances of the file at `path`, in order."""
        raise NotImplementedError

    def text_to_instance(self, *inputs: Any) -> Instance:
        """An instance from the raw inputs of one example (the label optional)."""
        raise NotImplementedError

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from a JSON object with the data files' keys (the label optional)."""
        raise NotImplementedError

