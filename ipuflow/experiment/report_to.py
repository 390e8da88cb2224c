"""The top-level `report_to` shortcut: name experiment trackers and get their trainer callbacks."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from ipuflow.config import ConfigurationError, Lazy
from ipuflow.config.errors import did_you_mean

# The trackers `report_to` can name, each the registered TrainerCallback that reports to it.
TRACKERS = ("tensorboard", "wandb", "mlflow")


def _callback_type(entry: Any) -> Optional[str]:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("type"), str):
        return entry["type"]
    return None


def _installed(tracker: str) -> bool:
    """Whether the package a tracker needs is installed (TensorBoard's writer always is)."""
    import importlib.util

    return tracker == "tensorboard" or importlib.util.find_spec(tracker) is not None


def reported_trackers(report_to: Union[None, str, List[str]]) -> List[str]:
    """The tracker names `report_to` gives (a name or a list), checked. As in the Hugging Face
    Trainer, ``"all"`` is every tracker whose package is installed and ``"none"`` is none."""
    if report_to == "none":
        return []
    if report_to == "all":
        return [tracker for tracker in TRACKERS if _installed(tracker)]
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    for index, name in enumerate(names):
        where = "report_to" if isinstance(report_to, str) else f"report_to.{index}"
        if name not in TRACKERS:
            raise ConfigurationError(
                f"{where}: {name!r} is not a tracker ipuflow reports to.{did_you_mean(str(name), TRACKERS)} "
                f"Trackers: {', '.join(TRACKERS)}, or \"all\" (those installed) or \"none\" (give other callbacks in "
                "trainer.callbacks)."
            )
    return names


def with_tracker_callbacks(trainer: Lazy, report_to: Union[None, str, List[str]]) -> Lazy:
    """`trainer` with a callback (`{"type": name}`) for every tracker in `report_to` that
    `trainer.callbacks` does not already configure (there it keeps its own settings)."""
    names = reported_trackers(report_to)
    params = trainer.params
    callbacks: List[Any] = list(params.as_dict().get("callbacks") or [])
    configured = {_callback_type(entry) for entry in callbacks}
    added: List[Dict[str, str]] = [{"type": name} for name in names if name not in configured]
    if not added:
        return trainer
    params["callbacks"] = callbacks + added
    return Lazy(trainer.constructor, params)
