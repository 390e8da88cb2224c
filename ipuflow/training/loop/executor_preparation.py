"""Fitting the training and validation loaders to their executors before the first update."""

from typing import Iterable, Optional

from ipuflow.config import ConfigurationError
from ipuflow.data.loader import DataLoader
from ipuflow.execution.executor import StepExecutor


def prepare_executors(executor: StepExecutor, data_loader: DataLoader, validation_executor: Optional[StepExecutor],
                      validation_loaders: Iterable[DataLoader]) -> None:
    """Fit each loader to its executor and compile every batch shape it can yield now, so that a later
    length bucket is not taken for a bad input; an executor refusing the model as it compiles it is
    reported at `trainer.executor`."""
    try:
        executor.prepare(data_loader)
        if validation_executor is not None:
            for loader in validation_loaders:
                validation_executor.prepare(loader)
    except ConfigurationError as error:
        raise error.locate("trainer.executor.") from None
