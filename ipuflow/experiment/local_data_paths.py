"""Data paths must be local: ipuflow downloads nothing. AllenNLP's configs often give URLs (its
`cached_path` fetched them), so a ported config's URLs are reported with its other mistakes,
before anything is read."""

from __future__ import annotations

from typing import Any, List, Mapping

from ipuflow.config import ConfigurationError

DATA_PATH_KEYS = ("train_data_path", "validation_data_path", "test_data_path")


def remote_data_path_errors(config: Mapping[str, Any]) -> List[ConfigurationError]:
    """An error for each top-level data path that is a URL."""
    return [
        ConfigurationError(
            "ipuflow downloads nothing (AllenNLP's cached_path did): download the file and give its local path.",
            path=key, expected="a local file or directory", found=config[key])
        for key in DATA_PATH_KEYS
        if isinstance(config.get(key), str) and "://" in config[key]
    ]
