"""Step executors: one host call runs many micro-batches and several optimizer updates.

Importing this package registers the ``native`` and ``poptorch`` executors; poptorch itself is
imported only when a poptorch executor is built.
"""

from ipuflow.execution.executor import Batch, StepExecutor, StepResult
from ipuflow.execution.native import NativeExecutor
from ipuflow.execution.options import BatchingPlan, ExecutionOptions
from ipuflow.execution.poptorch import PoptorchExecutor

__all__ = ["Batch", "BatchingPlan", "ExecutionOptions", "NativeExecutor", "PoptorchExecutor", "StepExecutor", "StepResult"]
