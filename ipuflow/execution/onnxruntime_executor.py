"""The `onnxruntime` inference executor: runs a model exported by `ipuflow export` with ONNX Runtime.

`ipuflow evaluate/predict --executor onnxruntime` use it in place of the PyTorch inference executor;
the PyTorch model is still there for what surrounds the forward (metrics, readable outputs).
onnxruntime is imported only when an executor is built.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError
from ipuflow.config.requirements import PackageRequirement
from ipuflow.execution.executor import Batch, StepExecutor, StepResult
from ipuflow.execution.input_spec import InputSpec
from ipuflow.execution.step_outputs import OutputCollector, find_loss

_NUMPY_DTYPES = {
    "tensor(int64)": torch.int64, "tensor(int32)": torch.int32, "tensor(bool)": torch.bool,
    "tensor(float)": torch.float32, "tensor(float16)": torch.float16, "tensor(double)": torch.float64,
}


class OnnxSession:
    """An ONNX Runtime session over an exported model that takes and returns torch tensors by name.

    Inputs the graph marks optional (labels) and a batch lacks are filled as padding rows are; a
    batch whose shapes or dtypes do not fit the graph is an error naming the input.
    """

    def __init__(self, model_file: str, record: Any, providers: Optional[List[str]] = None,
                 intra_op_threads: Optional[int] = None) -> None:
        import onnxruntime  # type: ignore[import-untyped]

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if intra_op_threads is not None:
            options.intra_op_num_threads = intra_op_threads
        available = onnxruntime.get_available_providers()
        wanted = providers or ["CPUExecutionProvider"]
        missing = [name for name in wanted if name not in available]
        if missing:
            raise ConfigurationError(f"ONNX Runtime here has no {missing}; available: {available}.", key="providers")
        self.session = onnxruntime.InferenceSession(model_file, sess_options=options, providers=wanted)
        self.record = record
        self.model_file = model_file
        self._graph_inputs = {item.name: item for item in self.session.get_inputs()}
        self._specs = {item.name: item for item in record.inputs}
        self.output_names = [item.name for item in self.session.get_outputs()]

    def check(self, batch: Mapping[str, torch.Tensor]) -> None:
        """Raise if `batch` cannot be fed to the graph: unknown or missing keys, dtypes, fixed dims."""
        unknown = [key for key in batch if key not in self._graph_inputs]
        if unknown:
            raise ValueError(f"{self.model_file} takes inputs {list(self._graph_inputs)}; the batch also has {unknown}.")
        for name, graph_input in self._graph_inputs.items():
            spec = self._specs.get(name)
            if name not in batch:
                if spec is None or not spec.optional:
                    raise ValueError(f"{self.model_file} needs input {name!r}, which the batch lacks.")
                continue
            value = batch[name]
            expected = _NUMPY_DTYPES.get(graph_input.type)
            if expected is not None and value.dtype != expected:
                raise ValueError(f"Data type mismatch for {name}: the ONNX model takes {expected} but got {value.dtype}.")
            shape = list(graph_input.shape)
            if len(shape) != value.dim() or any(
                isinstance(size, int) and size != got for size, got in zip(shape, value.shape)
            ):
                # Bad input for this file (a --batch-size or max_length other than the export's): exit 2.
                raise ConfigurationError(
                    f"Shape mismatch for {name}: the ONNX model {self.model_file} was exported with fixed shapes and "
                    f"takes {shape}, but got {list(value.shape)}. Export with --dynamic for other batch sizes or "
                    f"sequence lengths, or use the exported --batch-size."
                )

    def feeds(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
        """The graph's inputs for `batch`, by name, as numpy arrays (absent optional ones filled)."""
        rows = next(iter(batch.values())).shape[0]
        feed = {}
        for name in self._graph_inputs:
            value = batch.get(name)
            if value is None:
                spec = self._specs[name]
                dtype = getattr(torch, spec.dtype)
                shape = [rows if index == 0 or not isinstance(size, int) else size for index, size in enumerate(spec.shape)]
                value = torch.full(shape, spec.fill or 0, dtype=dtype)
            feed[name] = value.detach().cpu().contiguous().numpy()
        return feed

    def run(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The graph's outputs for `batch`, by name, as CPU tensors."""
        results = self.session.run(self.output_names, self.feeds(batch))
        return {name: torch.from_numpy(value) for name, value in zip(self.output_names, results)}


@StepExecutor.register("onnxruntime")
class OnnxRuntimeExecutor(StepExecutor):
    """Inference only: runs `model_file` (written by `ipuflow export` from the same archive) with ONNX
    Runtime, with the same batching semantics and outputs as the PyTorch inference executor.

    `providers` are ONNX Runtime execution providers (default CPUExecutionProvider);
    `intra_op_threads` the CPU threads per call (default: ONNX Runtime's, one per core). `model`
    is the archive's PyTorch model; its weights must be those the file was exported from.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (PackageRequirement("onnxruntime", "onnxruntime", "onnx"),)

    def __init__(
        self,
        model: torch.nn.Module,
        model_file: str,
        optimizer: Optional[torch.optim.Optimizer] = None,
        providers: Optional[List[str]] = None,
        intra_op_threads: Optional[int] = None,
        check_weights: bool = True,
        **options: Any,
    ) -> None:
        """The file to run and where.

        model_file: the ONNX file written by `ipuflow export` from this archive.
        providers: ONNX Runtime execution providers, e.g. ["CUDAExecutionProvider", "CPUExecutionProvider"].
        intra_op_threads: CPU threads per call (default: ONNX Runtime's, one per core).
        check_weights: refuse a file exported from other weights than the model's.
        """
        if options.get("training", True):
            raise ConfigurationError(
                "the onnxruntime executor runs inference only (evaluate, predict); train with native or poptorch.", key=""
            )
        super().__init__(model, optimizer, **options)
        from ipuflow.execution.onnx_metadata import read_record, weights_digest

        if not os.path.isfile(model_file):
            raise ConfigurationError(
                f"{model_file} does not exist; write it with `ipuflow export ARCHIVE -o {model_file}`.", key="model_file"
            )
        record = read_record(model_file)
        if check_weights and record.weights_sha256 != weights_digest(model):
            raise ConfigurationError(
                f"{model_file} was exported from other weights than this archive's; export this archive again."
            )
        self._session = OnnxSession(model_file, record, providers, intra_op_threads)
        self._spec: Optional[InputSpec] = None
        self._attached = False

    @property
    def device(self) -> torch.device:
        """Outputs come back on the host."""
        return torch.device("cpu")

    @property
    def record(self) -> Any:
        """The export record read from the model file."""
        return self._session.record

    def inference_executor(self) -> "OnnxRuntimeExecutor":
        """This executor (it is one)."""
        return self

    def compile(self, sample_batch: Batch) -> None:
        """Fix the input spec from a combined batch, after checking each micro-batch fits the graph."""
        if self._spec is not None:
            if not self._spec.add(sample_batch, self._plan):
                return
        else:
            self._spec = InputSpec(sample_batch, self._plan)
        for micro_batch in self._micro_batches(sample_batch):
            self._session.check(micro_batch)
            break
        self._attached = True

    def accepts(self, batch: Batch) -> bool:
        """Whether `batch` has a compiled signature."""
        return self._spec is not None and self._spec.matches(batch)

    def __call__(self, batch: Batch) -> StepResult:
        """Run every micro-batch of a combined batch through ONNX Runtime."""
        if self._spec is None or not self._spec.matches(batch):
            if self._spec is not None:
                self._spec.check(batch)
            self.compile(batch)
        assert self._spec is not None
        collector = OutputCollector(self._plan)
        plan = self._plan
        for index, micro_batch in enumerate(self._micro_batches(batch)):
            outputs = self._session.run(micro_batch)
            step, replica = divmod(index, plan.replication_factor)
            collector.add(step, replica, outputs, find_loss(outputs, training=False))
        return StepResult(collector.outputs(), collector.mean_loss(), 0, self._spec.combined_batch)

    def _micro_batches(self, batch: Batch) -> List[Dict[str, torch.Tensor]]:
        """The micro-batches of a combined batch, in ``[device_iteration][replica]`` order."""
        plan = self._plan
        count = plan.batch_size_factor
        if count == 1:
            return [dict(batch)]
        return [dict(zip(batch.keys(), parts)) for parts in zip(*(value.chunk(count) for value in batch.values()))]

    def set_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """An inference executor has no optimizer."""
        raise RuntimeError("set_optimizer: the onnxruntime executor runs inference only.")

    def copy_weights_to_host(self) -> None:
        """Nothing to do: the weights are fixed in the ONNX file."""

    def copy_weights_to_device(self) -> None:
        """Nothing to do: the weights are fixed in the ONNX file (export again after changing them)."""

    def attach(self) -> None:
        """Mark the session as in use again."""
        self._attached = True

    def detach(self) -> None:
        """Mark the session as released (it keeps its memory, as an inference session does)."""
        self._attached = False

    @property
    def is_attached(self) -> bool:
        """Whether the executor is compiled and attached."""
        return self._spec is not None and self._attached

    @property
    def is_compiled(self) -> bool:
        """Whether `compile` has fixed the input spec."""
        return self._spec is not None

    def destroy(self) -> None:
        """Forget the input spec; the session stays loaded."""
        self._spec = None
        self._attached = False

    def state_dict(self) -> Dict[str, Any]:
        """No state: nothing trains."""
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Nothing to restore."""
