"""One experiment end to end: TrainModel, the serialization directory, and `ipuflow train`'s flow."""

from ipuflow.experiment.train_model import TrainModel

__all__ = ["TrainModel"]
