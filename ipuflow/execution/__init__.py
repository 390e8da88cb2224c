"""Step executors: one host call runs many micro-batches and several optimizer updates.

Importing this package registers the ``native``, ``poptorch`` and ``onnxruntime`` (inference only)
executors; poptorch and onnxruntime themselves are imported only when such an executor is built.
"""

from ipuflow.execution.executor import Batch, StepExecutor, StepResult
from ipuflow.execution.native import NativeExecutor
from ipuflow.execution.options import BatchingPlan, ExecutionOptions
from ipuflow.execution.poptorch import PoptorchExecutor
from ipuflow.execution.onnxruntime_executor import OnnxRuntimeExecutor  # listed after the training backends

__all__ = ["Batch", "BatchingPlan", "ExecutionOptions", "NativeExecutor", "OnnxRuntimeExecutor", "PoptorchExecutor", "StepExecutor", "StepResult"]
