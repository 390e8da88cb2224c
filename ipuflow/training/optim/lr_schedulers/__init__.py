"""Learning-rate schedulers; importing the package registers every built-in."""

from ipuflow.training.optim.lr_schedulers.learning_rate_scheduler import LearningRateScheduler
from ipuflow.training.optim.lr_schedulers.torch_schedulers import (
    ExponentialLearningRateScheduler,
    MultiStepLearningRateScheduler,
    ReduceOnPlateauLearningRateScheduler,
    StepLearningRateScheduler,
)
from ipuflow.training.optim.lr_schedulers.update_schedules import (
    ConstantLearningRateScheduler,
    ConstantWithWarmupLearningRateScheduler,
    CosineHardRestartsWithWarmupLearningRateScheduler,
    CosineWithWarmupLearningRateScheduler,
    LinearWithWarmup,
    NoamLR,
    PolynomialDecay,
    SlantedTriangular,
)
from ipuflow.training.optim.lr_schedulers.cosine import CosineWithRestarts
from ipuflow.training.optim.lr_schedulers.combined import CombinedLearningRateScheduler

__all__ = [
    "LearningRateScheduler",
    "StepLearningRateScheduler",
    "MultiStepLearningRateScheduler",
    "ExponentialLearningRateScheduler",
    "ReduceOnPlateauLearningRateScheduler",
    "ConstantLearningRateScheduler",
    "ConstantWithWarmupLearningRateScheduler",
    "CosineWithWarmupLearningRateScheduler",
    "CosineHardRestartsWithWarmupLearningRateScheduler",
    "NoamLR",
    "PolynomialDecay",
    "LinearWithWarmup",
    "SlantedTriangular",
    "CosineWithRestarts",
    "CombinedLearningRateScheduler",
]
