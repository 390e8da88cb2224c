"""Params: a config dict that remembers where each value sits, read from Jsonnet, JSON or YAML."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, MutableMapping, Optional, Sequence, Union

from ipuflow.config.errors import ConfigurationError, describe_value, did_you_mean

logger = logging.getLogger(__name__)

_NO_DEFAULT = object()

# Top-level keys first, then "type" first inside every object: the order people read configs in.
_TOP_LEVEL_KEY_ORDER: Sequence[str] = (
    "dataset_reader", "validation_dataset_reader", "train_data_path", "validation_data_path",
    "test_data_path", "evaluate_on_test", "vocabulary", "datasets_for_vocab_creation", "model",
    "data_loader", "validation_data_loader", "trainer",
)
_NESTED_KEY_ORDER: Sequence[str] = ("type",)

Overrides = Union[str, Mapping[str, Any]]
"""One set of config edits: a Jsonnet/JSON object as text, or a dict."""


class Params(MutableMapping[str, Any]):
    """A config dict whose values know their key path (`history`), for errors and for the log.

    Reading a value with `pop` logs it as ``trainer.optimizer.lr = 0.001``, so a run's log holds
    every value that was used. Nested dicts come back as `Params` with a longer history.
    """

    def __init__(self, params: Mapping[str, Any], history: str = "") -> None:
        # A dict is wrapped, not copied (as AllenNLP does), so that `p["b"]["c"] = 1` edits `p`.
        self.params: Dict[str, Any] = params if isinstance(params, dict) else dict(params)
        self.history = history

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: Union[str, os.PathLike],
        overrides: Union[Overrides, Sequence[Overrides]] = "",
        ext_vars: Optional[Mapping[str, str]] = None,
    ) -> "Params":
        """Read a `.jsonnet`, `.json`, `.yaml` or `.yml` file, then apply `overrides` (one, or several
        in order, as repeated `-o` flags give them).

        Every environment variable is a Jsonnet external variable (`std.extVar("NAME")`); entries
        of `ext_vars` take precedence over the environment.
        """
        path = Path(path)
        if not path.is_file():
            raise ConfigurationError(f"Config file {str(path)!r} does not exist.")
        variables = _external_variables(ext_vars)
        if path.suffix in (".yaml", ".yml"):
            import yaml

            try:
                loaded = yaml.load(path.read_text(), Loader=_config_yaml_loader())  # noqa: S506 - a SafeLoader
            except yaml.YAMLError as error:
                raise ConfigurationError(f"{path}: not valid YAML: {error}") from error
        else:
            loaded = json.loads(_evaluate_jsonnet(path.read_text(), str(path), variables, is_file=True))
        if not isinstance(loaded, dict):
            raise ConfigurationError(f"{path}: a config must be an object at the top level, found {describe_value(loaded)}.")
        for edits in ([overrides] if isinstance(overrides, (str, Mapping)) else overrides):
            if edits:
                loaded = with_overrides(loaded, parse_overrides(edits, variables))
        return cls(loaded)

    # -- reading ---------------------------------------------------------------------------------

    def path_of(self, key: str) -> str:
        """The full key path of `key` in this object, e.g. ``trainer.optimizer.lr``."""
        return f"{self.history}{key}"

    def pop(self, key: str, default: Any = _NO_DEFAULT, keep_as_dict: bool = False) -> Any:
        """Remove and return `key`; without a default, a missing key is an error naming its path."""
        if key in self.params:
            value = self.params.pop(key)
            if keep_as_dict or not _contains_dict(value):
                logger.info("%s = %s", self.path_of(key), _log_value(value))
                return value
            return self._wrap(key, value)
        if default is _NO_DEFAULT:
            raise self.missing_key_error(key)
        logger.info("%s = %s (default)", self.path_of(key), _log_value(default))
        return default

    def missing_key_error(self, key: str) -> ConfigurationError:
        """The error for a required key that the config does not give."""
        where = f" in {self.history.rstrip('.')!r}" if self.history else " at the top level of the config"
        return ConfigurationError(f"required key {key!r} is missing{where}.", path=self.path_of(key))

    def pop_int(self, key: str, default: Any = _NO_DEFAULT) -> Optional[int]:
        """Pop an integer (an integral string such as "5", as environment variables give, is accepted)."""
        value = self.pop(key, default)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
            return int(value)
        raise ConfigurationError(path=self.path_of(key), expected="an integer", found=value)

    def pop_float(self, key: str, default: Any = _NO_DEFAULT) -> Optional[float]:
        """Pop a number (a numeric string is accepted)."""
        value = self.pop(key, default)
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigurationError(path=self.path_of(key), expected="a number", found=value)

    def pop_bool(self, key: str, default: Any = _NO_DEFAULT) -> Optional[bool]:
        """Pop a boolean; the strings "true" and "false" are accepted."""
        value = self.pop(key, default)
        if value is None or isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise ConfigurationError(path=self.path_of(key), expected="true or false", found=value)

    def pop_choice(self, key: str, choices: Sequence[Any], default_to_first_choice: bool = False,
                   allow_class_names: bool = True) -> Any:
        """Pop a value that must be one of `choices` (or a dotted class path, if allowed)."""
        default = choices[0] if default_to_first_choice and choices else _NO_DEFAULT
        value = self.pop(key, default)
        if value in choices or (allow_class_names and isinstance(value, str) and "." in value):
            return value
        hint = did_you_mean(value, [str(choice) for choice in choices]) if isinstance(value, str) else ""
        raise ConfigurationError(f"{value!r} is not one of {', '.join(map(str, choices))}.{hint}", path=self.path_of(key))

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` without removing it (nested dicts as Params)."""
        if key not in self.params:
            return default
        return self._wrap(key, self.params[key])

    def assert_empty(self, name: str) -> None:
        """Fail if keys remain that nothing used, naming them and the closest valid key."""
        if self.params:
            key = next(iter(self.params))
            raise ConfigurationError(f"unknown key for {name}.", path=self.path_of(key))

    # -- conversion ------------------------------------------------------------------------------

    def as_dict(self) -> Dict[str, Any]:
        """A deep copy as plain dicts and lists."""
        return copy.deepcopy(self.params)

    def as_flat_dict(self) -> Dict[str, Any]:
        """Nested objects flattened to dotted keys: ``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
        flat: Dict[str, Any] = {}

        def visit(prefix: str, value: Any) -> None:
            if isinstance(value, dict) and value:
                for key, child in value.items():
                    visit(f"{prefix}{key}.", child)
            else:
                flat[prefix[:-1]] = value

        for key, value in self.params.items():
            visit(f"{key}.", value)
        return flat

    def as_ordered_dict(self) -> Dict[str, Any]:
        """A plain dict whose keys follow the order people read configs in (then alphabetical)."""

        def order(value: Any, preferred: Sequence[str]) -> Any:
            if isinstance(value, dict):
                def rank(key: str) -> tuple:
                    return (preferred.index(key) if key in preferred else len(preferred), key)

                return {key: order(value[key], _NESTED_KEY_ORDER) for key in sorted(value, key=rank)}
            if isinstance(value, list):
                return [order(item, _NESTED_KEY_ORDER) for item in value]
            return value

        return order(self.params, _TOP_LEVEL_KEY_ORDER)

    def to_file(self, path: Union[str, os.PathLike]) -> None:
        """Write the config as indented JSON in reading order, atomically (a crash leaves the old file)."""
        from ipuflow.storage.atomic import write_text_atomically  # (storage needs no config; no cycle)

        write_text_atomically(Path(path), json.dumps(self.as_ordered_dict(), indent=2) + "\n")

    def duplicate(self) -> "Params":
        """An independent deep copy."""
        return Params(copy.deepcopy(self.params), self.history)

    # -- mapping protocol ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        if key not in self.params:
            raise KeyError(key)
        return self._wrap(key, self.params[key])

    def __setitem__(self, key: str, value: Any) -> None:
        self.params[key] = value

    def __delitem__(self, key: str) -> None:
        del self.params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    def __repr__(self) -> str:
        return f"Params({self.params!r}, history={self.history!r})"

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Params":
        return Params(copy.deepcopy(self.params, memo), self.history)

    def _wrap(self, key: str, value: Any) -> Any:
        if isinstance(value, dict):
            return Params(value, history=f"{self.path_of(key)}.")
        if isinstance(value, list):
            return [Params(item, f"{self.path_of(key)}.{i}.") if isinstance(item, dict) else item
                    for i, item in enumerate(value)]
        return value


def _contains_dict(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, list):
        return any(_contains_dict(item) for item in value)
    return False


def _log_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (str, list, dict, bool, type(None))) else repr(value)


# -- YAML ----------------------------------------------------------------------------------------------

# PyYAML implements YAML 1.1, whose floats need a dot: `1e-3` would be the string "1e-3". Configs mean
# a number there (YAML 1.2 and JSON agree), so exponent spellings without a dot resolve as floats too.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")


def _config_yaml_loader() -> type:
    """A safe YAML loader that also reads `1e-3`-style numbers as floats."""
    import yaml

    global _yaml_loader
    if _yaml_loader is None:
        class ConfigYamlLoader(yaml.SafeLoader):
            """yaml.SafeLoader plus floats in exponent notation without a dot."""

        ConfigYamlLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+.0123456789"))
        _yaml_loader = ConfigYamlLoader
    return _yaml_loader


_yaml_loader: Optional[type] = None


# -- Jsonnet ------------------------------------------------------------------------------------------


def _external_variables(ext_vars: Optional[Mapping[str, str]]) -> Dict[str, str]:
    variables: Dict[str, str] = {}
    for name, value in os.environ.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # surrogate-escaped bytes cannot reach Jsonnet
            continue
        variables[name] = value
    variables.update(ext_vars or {})
    return variables


def _evaluate_jsonnet(source: str, filename: str, variables: Mapping[str, str], is_file: bool) -> str:
    import _jsonnet

    try:
        if is_file:
            return _jsonnet.evaluate_file(filename, ext_vars=dict(variables))
        return _jsonnet.evaluate_snippet(filename, source, ext_vars=dict(variables))
    except RuntimeError as error:
        text = str(error).strip()
        missing = re.search(r"undefined external variable: (\S+)", text)
        if missing:
            raise ConfigurationError(
                f"{filename}: std.extVar({missing.group(1)!r}) is not set. Set the environment "
                f"variable {missing.group(1)} or pass --ext-var {missing.group(1)}=VALUE."
            ) from None
        first_line = text.splitlines()[0] if text else "unknown error"
        raise ConfigurationError(f"{filename}: not valid Jsonnet: {first_line}") from None


def parse_overrides(overrides: Union[str, Mapping[str, Any]], ext_vars: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Overrides as a dict: a JSON/Jsonnet snippet (which may use `std.extVar`) or a dict."""
    if isinstance(overrides, Mapping):
        return dict(overrides)
    if not overrides.strip():
        return {}
    variables = _external_variables(ext_vars) if ext_vars is None else dict(ext_vars)
    parsed = json.loads(_evaluate_jsonnet(overrides, "overrides", variables, is_file=False))
    if not isinstance(parsed, dict):
        raise ConfigurationError(f"overrides: expected an object such as '{{\"trainer.num_epochs\": 3}}', found {describe_value(parsed)}.")
    return parsed


def with_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """`config` with `overrides` merged in; a dotted key and the nested object it spells mean the same.

    ``{"a.b": 1}`` and ``{"a": {"b": 1}}`` both set one leaf and keep the rest of `a`. An object merges
    into an object key by key (a missing key is added), into a list by index (``{"lst.0": x}``), and
    into a string as ``{"type": string}`` (a registered name written bare), except into a top-level
    data path (``validation_data_path``: a file, which an object of named sets replaces); any other
    value replaces what is there, so ``{"a": null}`` followed by ``{"a": {...}}`` replaces `a` whole. A list index out
    of range, or an object merged into a number or a boolean, is an error naming the path.
    """
    return _merge(copy.deepcopy(dict(config)), _unflatten(overrides, ""), "")  # type: ignore[return-value]


def _unflatten(overrides: Mapping[str, Any], prefix: str) -> Dict[str, Any]:
    """Dotted keys as nested objects, at every depth; the same key given twice is an error."""
    nested: Dict[str, Any] = {}
    for key, value in overrides.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"overrides: {prefix}{key!r} is not a config key.")
        value = _unflatten(value, f"{prefix}{key}.") if isinstance(value, Mapping) else copy.deepcopy(value)
        parts = key.split(".")
        node = nested
        for depth, part in enumerate(parts):
            path = prefix + ".".join(parts[: depth + 1])
            last = depth == len(parts) - 1
            if part not in node:
                node[part] = value if last else {}
            elif last and isinstance(node[part], dict) and isinstance(value, dict):
                _merge_unflattened(node[part], value, path)
            elif last or not isinstance(node[part], dict):
                raise ConfigurationError(f"overrides: {path!r} is given twice in one override; give it once.")
            node = node[part]
    return nested


def _merge_unflattened(node: Dict[str, Any], other: Dict[str, Any], path: str) -> None:
    for key, value in other.items():
        if key in node and isinstance(node[key], dict) and isinstance(value, dict):
            _merge_unflattened(node[key], value, f"{path}.{key}")
        elif key in node:
            raise ConfigurationError(f"overrides: {f'{path}.{key}'!r} is given twice in one override; give it once.")
        else:
            node[key] = value


def _is_data_path(path: str) -> bool:
    """Whether `path` (``"key."``) is a top-level ``*_data_path``: a file, never a registered name."""
    return path.count(".") == 1 and path.endswith("_data_path.")


def _merge(target: Any, edits: Any, path: str) -> Any:
    """`target` with `edits` merged in (both already copies: `target` is changed in place)."""
    if not isinstance(edits, dict):
        return edits
    if target is None:
        return edits
    if isinstance(target, str):
        if _is_data_path(path):
            return edits
        target = {"type": target}
    if isinstance(target, dict):
        for key, value in edits.items():
            target[key] = _merge(target[key], value, f"{path}{key}.") if key in target else value
        return target
    if isinstance(target, list):
        for key, value in edits.items():
            index = _list_index(target, key, f"{path}{key}")
            target[index] = _merge(target[index], value, f"{path}{key}.")
        return target
    where = path.rstrip(".")
    first = next(iter(edits))
    raise ConfigurationError(
        f"overrides: {f'{where}.{first}'!r} goes into {where!r}, which is {describe_value(target)}, not an object or "
        f"a list. To replace {where!r} with an object, set it to null in an earlier -o."
    )


def _list_index(node: List[Any], part: str, walked: str) -> int:
    if not re.fullmatch(r"-?\d+", part) or not -len(node) <= int(part) < len(node):
        raise ConfigurationError(
            f"overrides: {walked!r}: {part!r} is not an index of the list {walked.rpartition('.')[0]!r} "
            f"(length {len(node)})."
        )
    return int(part)
