"""One experiment end to end: TrainModel, the serialization directory, and `ipuflow train`'s flow."""

from ipuflow.experiment.train_model import TrainModel
from ipuflow.plugins import keep_moved_modules_importable

# Module paths from before the archive had a room of its own (issue 33), kept for scripts that import them.
MOVED_MODULES = {
    "archival": "ipuflow.experiment.archive.archival",
    "archive_extraction": "ipuflow.experiment.archive.extraction",
    "archive_sizes": "ipuflow.experiment.archive.sizes",
    "archive_settings": "ipuflow.experiment.archive.settings",
    "archived_pretrained": "ipuflow.experiment.archive.pretrained",
}
"""{old name under ipuflow.experiment: its module now}; each old name is the same module object."""
keep_moved_modules_importable(__name__, MOVED_MODULES)

__all__ = ["TrainModel"]
