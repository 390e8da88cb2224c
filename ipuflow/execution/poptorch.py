"""The poptorch step executor: the same contract on Graphcore IPUs, through poptorch's PoplarExecutor.

poptorch is imported only when this executor is built. The options map to `poptorch.Options` as
optimum-graphcore's `IPUConfig.to_options` maps them; the torch optimizer is converted to its
`poptorch.optim` twin, and hyperparameters reach the device through `setOptimizer`.

Written against poptorch 3.4's documented API and tested only through a stand-in module: no IPU
hardware was available (docs/execution.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution.executor import COMPILE_IGNORED_WARNING, Batch, StepExecutor, StepResult, require_optimizer_for
from ipuflow.execution.input_spec import InputSpec
from ipuflow.execution.ipu_config import IpuPlacement, MatmulProportion, resolve_placements
from ipuflow.execution.ipu_ops import BLOCK_ATTRIBUTE
from ipuflow.execution.optimum_ipu_config import ipu_config_applied
from ipuflow.execution.pipeline_layout import layout_blocks
from ipuflow.execution.pipeline_trace import PlacementTrace, check_pipeline_accumulation
from ipuflow.execution.rng import get_rng_states, set_rng_states
from ipuflow.execution.step_outputs import find_loss

LAMB_MAX_WEIGHT_NORM = 65500.0
"""poptorch's LAMB `max_weight_norm` when none is given (fp16's largest value, python/optim.py)."""

if TYPE_CHECKING:
    from ipuflow.data.loader import DataLoader

def poptorch_twin(optimizer_class: type) -> Optional[str]:
    """The name of the `poptorch.optim` twin of a torch SGD/Adam/AdamW/RMSprop class (or a subclass:
    ipuflow's registered optimizers subclass these only to take config arguments, their step is the
    base class's), or the twin that a class torch lacks names in its `poptorch_twin` attribute, or None.

    The attribute is how ipuflow's Lamb (in the training package, above this one) says it is LAMB."""
    declared = getattr(optimizer_class, "poptorch_twin", None)
    if isinstance(declared, str):
        return declared
    for base, name in ((torch.optim.AdamW, "AdamW"), (torch.optim.Adam, "Adam"), (torch.optim.SGD, "SGD"),
                       (torch.optim.RMSprop, "RMSprop")):
        # AdamW first: newer torch makes AdamW an Adam subclass.
        if issubclass(optimizer_class, base):
            return name
    return None

SUPPORTED_OPTIMIZERS = ("sgd", "adam", "adamw", "rmsprop", "lamb")
"""The registered optimizer names the poptorch executor converts (named in its refusal)."""

_OUTPUT_MODES = {"final": "Final", "all": "All", "sum": "Sum", "every_n": "EveryN"}

OFFLINE_IPU_VERSIONS = {2: "Mk2", 21: "Bow"}
"""The IPU versions `offline_ipu_version` takes (poptorch's `useOfflineIpuTarget(ipu_version=2)`)."""


class PoptorchUnavailable(ConfigurationError):
    """poptorch cannot be imported (no Poplar SDK here); a dry run checks the config without it."""


def import_poptorch() -> ModuleType:
    """poptorch, or a `PoptorchUnavailable` error saying where it comes from (any import failure counts)."""
    try:
        return importlib.import_module("poptorch")
    except Exception as error:  # poptorch raises ImportError without an SDK, AssertionError on a torch mismatch
        raise PoptorchUnavailable(
            "'poptorch' needs the poptorch package, which comes with Graphcore's Poplar SDK (it is not on PyPI); "
            f"importing it failed: {type(error).__name__}: {error}. Activate the SDK and install its poptorch "
            "wheel, or use the 'native' executor.",
            key="type",
        ) from error


def resolve_layer_list(model: torch.nn.Module, path: str) -> Any:
    """The ModuleList or Sequential at the dotted `path` of `model` (`pipeline_layers`), or a ConfigurationError."""
    target: Any = model
    for part in path.split("."):
        if not hasattr(target, part):
            raise ConfigurationError(f"the model has no {path!r} (no attribute {part!r}).", key="pipeline_layers")
        target = getattr(target, part)
    if not isinstance(target, (torch.nn.ModuleList, torch.nn.Sequential)):
        raise ConfigurationError(f"{path!r} is a {type(target).__name__}, expected a ModuleList or Sequential.",
                                 key="pipeline_layers")
    return target


def _refuse_ipu_config_file(ipu_config: Optional[str]) -> None:
    """An ipu_config path given to the constructor is refused: the file is read by `from_params`."""
    if ipu_config is not None:
        raise ConfigurationError(
            "the file is read when the executor is built from a config (PoptorchExecutor.from_params); in "
            "Python, pass read_ipu_config(path) as keyword arguments.",
            key="ipu_config",
        )


def _check_offline_ipu_version(version: int) -> None:
    """Refuse an IPU version --compile-only cannot compile for."""
    if version not in OFFLINE_IPU_VERSIONS:
        raise ConfigurationError(f"expected one of {', '.join(map(str, OFFLINE_IPU_VERSIONS))} (2: Mk2, 21: Bow), "
                                 f"found {version!r}.", key="offline_ipu_version")


@StepExecutor.register("poptorch")
class PoptorchExecutor(StepExecutor):
    """The executor contract on IPUs (poptorch): each executable traced in its own mode, trained on the reported loss, one attached at a time.

    IPU options (optimum-graphcore's IPUConfig names): `layers_per_ipu`, `ipus_per_replica`,
    `matmul_proportion`, `enable_half_partials`, `optimizer_state_offchip`,
    `replicated_tensor_sharding`, `executable_cache_dir`, `recompute_checkpoint_every_layer`,
    `embedding_serialization_factor` and their ``inference_*`` twins. `pipeline_layers` is the dotted
    path of the model's layer list (e.g. ``"encoder.layers"``) that `layers_per_ipu` places; it is
    needed when a replica spans several IPUs or for per-layer recomputation checkpoints (which reach
    every tensor a layer returns, tuples included), except for a model that declares its layout
    (`Model.pipeline_layout`: Hugging Face models, placed as optimum places them). Blocks the model
    places itself with `ipu_ops.BeginBlock` are applied when it compiles. A training pipeline of S stages needs
    `gradient_accumulation` >= 2·S − 1 (poptorch's rule; refused when the executor is built).
    `precision: fp16` makes the model fp16 (as optimum does); IPUs have no bf16. `auto_loss_scaling`
    is PopART's: no update is skipped, the scale halves or doubles after each update.

    As on an IPU: each executable is traced in its own mode (train, eval) set right before its
    compile; the training executor marks the model's reported loss with `poptorch.identity_loss`, so
    the IPU differentiates the loss ipuflow reports; the training executor and its inference twin
    detach each other before compiling, running or attaching, so at most one holds the IPUs.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: Optional[torch.optim.Optimizer] = None,
        ipu_config: Optional[str] = None,
        pipeline_layers: Optional[str] = None,
        layers_per_ipu: Optional[List[int]] = None,
        inference_layers_per_ipu: Optional[List[int]] = None,
        ipus_per_replica: Optional[int] = None,
        inference_ipus_per_replica: Optional[int] = None,
        matmul_proportion: MatmulProportion = 0.2,
        inference_matmul_proportion: Optional[MatmulProportion] = None,
        enable_half_partials: bool = True,
        optimizer_state_offchip: bool = False,
        replicated_tensor_sharding: bool = False,
        executable_cache_dir: str = "",
        recompute_checkpoint_every_layer: bool = False,
        embedding_serialization_factor: Optional[int] = None,
        inference_embedding_serialization_factor: Optional[int] = None,
        offline_ipu_version: int = 2,
        compile_only: bool = False,
        **options: Any,
    ) -> None:
        """The shared executor options (StepExecutor) plus the IPU ones, named as optimum-graphcore's IPUConfig names them.

        ipu_config: an optimum-graphcore ipu_config.json whose keys fill the ones this block leaves out (relative: to the working directory).
        pipeline_layers: dotted path of the layer list (e.g. "encoder.layers") layers_per_ipu places, for models with no layout.
        layers_per_ipu: layers on each IPU of a replica, in order; -1 shares the rest (IPUConfig's wildcard); S IPUs need accumulation >= 2S-1.
        inference_layers_per_ipu: layers_per_ipu of the inference executor (default: layers_per_ipu).
        ipus_per_replica: IPUs one replica spans (default: one per layers_per_ipu entry).
        inference_ipus_per_replica: ipus_per_replica of the inference executor.
        matmul_proportion: share of each IPU's memory for matmul temporaries (poptorch's setAvailableMemoryProportion): one number or one per IPU.
        inference_matmul_proportion: matmul_proportion of the inference executor.
        enable_half_partials: fp16 matmul and convolution partials (Precision.setPartialsType(torch.half)).
        optimizer_state_offchip: keep the optimizer state in streaming memory (TensorLocations.setOptimizerLocation).
        replicated_tensor_sharding: shard the optimizer state across replicas (with replication_factor > 1).
        executable_cache_dir: directory of poptorch's executable cache ("" or "disabled": off).
        recompute_checkpoint_every_layer: checkpoint every tensor each placed layer but the last returns (poptorch.recomputationCheckpoint).
        embedding_serialization_factor: must be 1: serialised embeddings need optimum-graphcore's SerializedEmbedding.
        inference_embedding_serialization_factor: embedding_serialization_factor of the inference executor.
        offline_ipu_version: the IPU --compile-only compiles for, none attached: 2 (Mk2, poptorch's default) or 21 (Bow).
        compile_only: compile for that offline IPU only (set by --compile-only, not a config key); such an executor cannot run.
        """
        _refuse_ipu_config_file(ipu_config)
        # The IPU options, kept to build poptorch.Options and the inference twin.
        self._arguments = {key: value for key, value in locals().items() if key not in ("self", "model", "optimizer", "options", "__class__")}
        super().__init__(model, optimizer, **options)
        self._refuse_unsupported_options()
        _check_offline_ipu_version(offline_ipu_version)
        self._placement: IpuPlacement = self._resolve_placement()
        # The training executor refuses too: the run would evaluate (validation, test, the archive) later.
        _refuse_host_driven_evaluation(model)
        self._poptorch = import_poptorch()
        self._model = model
        self._place_model(pipeline_layers, recompute_checkpoint_every_layer)
        self._host_optimizer = optimizer
        self._device_optimizer = self._convert_optimizer(optimizer) if optimizer is not None else None
        self._poptorch_options = self._build_options()
        self._poplar = self._wrap_model()
        self._start_uncompiled()

    def _start_uncompiled(self) -> None:
        """Nothing compiled yet, no inference twin."""
        self._spec: Optional[InputSpec] = None
        self._device_rng: Optional[Dict[str, Any]] = None  # a checkpoint's device RNG state, set once compiled
        self._inference: Optional[PoptorchExecutor] = None
        # The training executor and its inference twin share the IPUs: at most one holds them.
        self._twin: Optional[PoptorchExecutor] = None

    @classmethod
    def from_params(cls, params: Any, constructor_to_call: Any = None, constructor_to_inspect: Any = None,
                    **extras: Any) -> "PoptorchExecutor":
        """Build from the executor block; an `ipu_config` file fills the keys the block leaves out."""
        with ipu_config_applied(params, extras) as merged:
            return super().from_params(merged, constructor_to_call, constructor_to_inspect, **extras)

    @classmethod
    def check_optimizer(cls, optimizer_class: type, max_grad_norm: Optional[float]) -> None:
        """Refuse optimizers without a poptorch.optim twin (and clipping where the twin has none)."""
        check_poptorch_optimizer(optimizer_class, max_grad_norm)

    @classmethod
    def check_model(cls, model_class: type, model_config: Mapping[str, Any]) -> None:
        """Refuse a model whose config asks for a host-driven evaluation (generation)."""
        declared = getattr(model_class, "host_driven_evaluation_in", None)
        if callable(declared):
            _refuse_host_driven(declared(model_config))

    @classmethod
    def check_available(cls) -> None:
        """Refuse a host where poptorch cannot be imported."""
        import_poptorch()

    # -- construction steps -------------------------------------------------------------------------

    def _refuse_unsupported_options(self) -> None:
        """Refuse the shared options an IPU cannot honour: bf16 and gradient value clipping."""
        if self._options.precision == "bf16":
            raise ConfigurationError("IPUs have no bf16; use 'fp16' or 'fp32' with the poptorch executor.", key="precision")
        if self._options.max_grad_value is not None:
            # poptorch.optim clips only by global norm (max_grad_norm); it has no value clipping.
            raise ConfigurationError(
                f"poptorch's optimizers have no gradient value clipping (this key, also set by trainer.grad_clipping), "
                f"found {self._options.max_grad_value}; clip the global norm with max_grad_norm (trainer.grad_norm) "
                "instead, or use the 'native' executor.",
                key="max_grad_value",
            )

    def _resolve_placement(self) -> IpuPlacement:
        """This mode's placement (layers per IPU, IPUs per replica, matmul proportions), checked."""
        arguments = self._arguments
        training_placement, inference_placement = resolve_placements(
            arguments["layers_per_ipu"], arguments["inference_layers_per_ipu"], arguments["ipus_per_replica"],
            arguments["inference_ipus_per_replica"], arguments["matmul_proportion"],
            arguments["inference_matmul_proportion"], arguments["embedding_serialization_factor"],
            arguments["inference_embedding_serialization_factor"],
        )
        return training_placement if self.training else inference_placement

    def _place_model(self, pipeline_layers: Optional[str], recompute_checkpoint_every_layer: bool) -> None:
        """Find the model's layer list and its own blocks, and check that the placement fits them (and,
        in training, that gradient accumulation fills the pipeline)."""
        self._layers = resolve_layer_list(self._model, pipeline_layers) if pipeline_layers else None
        self._model_blocks = model_blocks(self._model)
        self._checkpoint_hooks: List[Any] = []  # the recomputation checkpoints _place_layers hooks on at compile
        key = "layers_per_ipu" if self.training else "inference_layers_per_ipu"
        if self._layers is None and not self._model_blocks and (self._placement.ipus_per_replica > 1
                                                                 or recompute_checkpoint_every_layer):
            # A model that knows its parts (Model.pipeline_layout) is placed as optimum places its models.
            self._layers, self._model_blocks = layout_blocks(self._model, self._placement, key)
        if self._layers is None and ((self._placement.ipus_per_replica > 1 and not self._model_blocks)
                                     or recompute_checkpoint_every_layer):
            raise ConfigurationError(
                "placing layers on several IPUs (ipus_per_replica > 1) or checkpointing every layer needs the "
                "dotted path of the model's layer list, e.g. \"encoder.layers\" (or blocks the model places "
                "itself with ipu_ops.BeginBlock).",
                key="pipeline_layers",
            )
        if self._layers is not None:
            self._placement.layer_ipus(len(self._layers), key)
        self._check_model_blocks()
        if self.training and self._layers is not None and not self._model_blocks:
            # A layer list runs in its order: the rule can be checked now. The model's own blocks (and
            # Block scopes) are checked in the order its forward enters them, when it compiles.
            check_pipeline_accumulation([ipu for _, _, ipu in self._placed_modules()], self._plan.gradient_accumulation)

    def _wrap_model(self) -> Any:
        """poptorch's executor over the model in this executor's precision and mode; a training one
        marks the model's reported loss as the one to differentiate."""
        model, training = self._model, self.training
        if self._options.precision == "fp16":
            model.half()
        # poptorch wraps a shallow copy: the top module's mode is copied now, the submodules' modes are
        # read when compile() traces them (which sets them again).
        model.train(training)
        self._loss_mark = _TrainingLossMark(self._poptorch) if training else None
        self._loss_mark_hook = model.register_forward_hook(self._loss_mark) if self._loss_mark is not None else None
        # Entered around every poptorch compile and call: the hook marks the loss only inside it.
        self._marking_loss: Any = self._loss_mark if self._loss_mark is not None else contextlib.nullcontext()
        if training:
            return self._poptorch.trainingModel(model, options=self._poptorch_options, optimizer=self._device_optimizer)
        return self._poptorch.inferenceModel(model, options=self._poptorch_options)

    # -- placement ----------------------------------------------------------------------------------

    def _check_model_blocks(self) -> None:
        """Check that the model's own blocks are on IPUs the replica has and on no layer that
        `pipeline_layers` places too."""
        placed = {id(layer) for layer in self._layers} if self._layers is not None else set()
        ipus = self._placement.ipus_per_replica
        for module, (user_id, ipu) in self._model_blocks:
            if id(module) in placed:
                raise ConfigurationError(
                    f"the model places block {user_id!r} itself (ipu_ops.BeginBlock) on a layer that pipeline_layers "
                    "places too; place the layers one way: drop the block, or leave the layer list out.",
                    key="pipeline_layers",
                )
            if ipu is not None and ipu >= ipus:
                raise ConfigurationError(
                    f"the model places block {user_id!r} on IPU {ipu} (ipu_ops.BeginBlock), but a replica spans "
                    f"{ipus} IPU(s); set ipus_per_replica to at least {ipu + 1}.",
                    key="ipus_per_replica",
                )

    def _placed_modules(self) -> List[Tuple[torch.nn.Module, Optional[str], int]]:
        """Every module that starts a block, (module, user_id, IPU): the model's own blocks and the
        layers of `pipeline_layers`."""
        placed = [(module, user_id, ipu) for module, (user_id, ipu) in self._model_blocks if ipu is not None]
        if self._layers is not None:
            ipus = self._placement.layer_ipus(len(self._layers))
            placed += [(layer, f"Layer{index}", ipu) for index, (layer, ipu) in enumerate(zip(self._layers, ipus))]
        return placed

    # -- poptorch options and optimizer ------------------------------------------------------------

    def _build_options(self) -> Any:
        """poptorch.Options for this mode, in the order optimum's IPUConfig.to_options sets them."""
        poptorch, plan, options = self._poptorch, self._plan, self._options
        arguments = self._arguments
        opts = poptorch.Options()
        opts.autoRoundNumIPUs(True)
        opts.replicationFactor(plan.replication_factor)
        opts.deviceIterations(plan.device_iterations)
        if plan.training:
            opts.Training.gradientAccumulation(plan.gradient_accumulation)
            opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
            if options.auto_loss_scaling:
                opts.Training.setAutomaticLossScaling(True)
        mode = getattr(poptorch.OutputMode, _OUTPUT_MODES[plan.output_mode])
        if plan.output_mode == "every_n":
            opts.outputMode(mode, plan.output_period)
        else:
            opts.outputMode(mode)
        if options.seed is not None:
            opts.randomSeed(options.seed)  # seed 0 included, unlike optimum; poptorch seeds torch with it too
        else:
            # The device is seeded only when randomSeed is set (poptorch Compiler.cpp): seed it from the
            # host's seed (pytorch_seed) so that runs repeat, leaving the host's generator where it is.
            with torch.random.fork_rng(devices=[]):
                opts.randomSeed(torch.initial_seed())
        settings = poptorch.TensorLocationSettings().useOnChipStorage(not arguments["optimizer_state_offchip"])
        settings = settings.useReplicatedTensorSharding(bool(arguments["replicated_tensor_sharding"]) and plan.replication_factor > 1)
        opts.TensorLocations.setOptimizerLocation(settings)
        strategy = poptorch.PipelinedExecution if plan.training else poptorch.ShardedExecution
        opts.setExecutionStrategy(strategy(poptorch.AutoStage.AutoIncrement))
        if arguments["compile_only"]:
            opts.useOfflineIpuTarget(arguments["offline_ipu_version"])  # as optimum's compile_only: no IPU needed
        opts.setAvailableMemoryProportion({f"IPU{index}": value for index, value in enumerate(self._placement.matmul_proportion)})
        cache = arguments["executable_cache_dir"]
        if cache and cache != "disabled":
            opts.enableExecutableCaching(cache)
        if options.precision == "fp16":
            opts.Precision.enableStochasticRounding(plan.training)
        if arguments["enable_half_partials"]:
            opts.Precision.setPartialsType(torch.half)
        return opts

    def _convert_optimizer(self, optimizer: torch.optim.Optimizer) -> Any:
        """The `poptorch.optim` twin of the host optimizer: the same groups and hyperparameters, all
        passed explicitly (poptorch compiles in the attributes left unset as constants, and a scheduler
        must be able to change them), plus loss scaling, clipping and optimum's fp16 state dtypes."""
        name = check_poptorch_optimizer(type(optimizer), self._options.max_grad_norm)
        keys = _GROUP_KEYS[name]
        if any(group.get("amsgrad") for group in optimizer.param_groups):
            raise ConfigurationError("poptorch's Adam and AdamW do not support amsgrad; set it to false.",
                                     path="trainer.optimizer.amsgrad")
        defaults = _device_group(optimizer.defaults, keys)
        groups = [{**_device_group(group, keys), "params": group["params"]} for group in optimizer.param_groups]
        extras: Dict[str, Any] = {"loss_scaling": self._options.loss_scaling if self._options.loss_scaling is not None else 1.0}
        if name in ("SGD", "Adam", "AdamW"):
            extras["max_grad_norm"] = self._options.max_grad_norm  # None: poptorch's default, no clipping
        if name == "LAMB":
            corrections = {bool(group["bias_correction"]) for group in optimizer.param_groups}
            if len(corrections) > 1:
                raise ConfigurationError("poptorch's LAMB takes one bias_correction for every group.",
                                         path="trainer.optimizer.parameter_groups")
            extras["bias_correction"] = corrections.pop()
        extras.update(_accumulation_types(name, self._options.precision == "fp16"))
        return getattr(self._poptorch.optim, name)(groups, **defaults, **extras)

    def _send_hyperparameters(self, optimizer: torch.optim.Optimizer) -> None:
        """Copy the host optimizer's current hyperparameters into its poptorch twin."""
        assert self._device_optimizer is not None
        keys = _GROUP_KEYS[check_poptorch_optimizer(type(optimizer))]
        for device_group, group in zip(self._device_optimizer.param_groups, optimizer.param_groups):
            device_group.update(_device_group(group, keys))

    # -- properties ---------------------------------------------------------------------------------

    @property
    def poptorch_options(self) -> Any:
        """The `poptorch.Options` this executor wrapped the model with."""
        return self._poptorch_options

    @property
    def poplar_executor(self) -> Any:
        """poptorch's PoplarExecutor."""
        return self._poplar

    @property
    def device(self) -> torch.device:
        """The host device: poptorch keeps the host copy of the weights on the CPU."""
        return torch.device("cpu")

    @property
    def model(self) -> torch.nn.Module:
        """The (host) model this executor runs."""
        return self._model

    def inference_executor(self) -> "PoptorchExecutor":
        """An inference executor over the same model (built once), with the inference options."""
        if not self.training:
            return self
        if self._inference is None:
            shared = dataclasses.asdict(self._options.as_inference())
            self._inference = PoptorchExecutor(model=self._model, **self._arguments, **shared)
            self._inference._twin, self._twin = self, self._inference
        return self._inference

    # -- compile and call ----------------------------------------------------------------------------

    def _place_layers(self) -> None:
        """BeginBlock the model's own blocks and each layer on its IPU (and checkpoint every layer but
        the last if asked). The blocks are placed afresh: the training and inference executors share
        the model and may place its layers differently."""
        poptorch, layers = self._poptorch, self._layers
        if layers is None and not self._model_blocks:
            return
        poptorch.removeBlocks(self._model)
        for module, (user_id, ipu) in self._model_blocks:
            poptorch.BeginBlock(module, user_id=user_id, ipu_id=ipu)
        for hook in self._checkpoint_hooks:
            hook.remove()
        self._checkpoint_hooks = []
        if layers is None:
            return
        for index, (layer, ipu) in enumerate(zip(layers, self._placement.layer_ipus(len(layers)))):
            poptorch.BeginBlock(layer, f"Layer{index}", ipu_id=ipu)
            if self._arguments["recompute_checkpoint_every_layer"] and index < len(layers) - 1:
                self._checkpoint_hooks.append(layer.register_forward_hook(_checkpoint_output(poptorch)))

    def compile(self, sample_batch: Batch) -> None:
        """Fix the input spec and compile the poptorch program for this combined batch."""
        if self._spec is not None and self._poplar.isCompiled():
            if self._spec.matches(sample_batch):
                warnings.warn(COMPILE_IGNORED_WARNING, stacklevel=2)
                return
            raise ValueError(
                "A poptorch executor holds one executable for one input signature; this batch differs "
                "from the compiled one. Use a fixed max_length instead of length_buckets with poptorch."
            )
        sample_batch = self._device_inputs(sample_batch)
        self._spec = InputSpec(sample_batch, self._plan)
        self._place_layers()
        # poptorch traces the modules in the mode they are in now (it never calls .train()); the
        # inference twin, built earlier, may have left them in eval mode.
        self._model.train(self.training)
        self._take_device()
        accumulation = self._plan.gradient_accumulation if self.training else None
        trace = PlacementTrace(self._model, self._placed_modules(), self._placement.ipus_per_replica, accumulation)
        with self._marking_loss, trace:
            try:
                self._poplar.compile(**sample_batch)
            except Exception:
                if trace.error is not None:  # refused from inside poptorch's trace, before it compiled
                    raise trace.error from None
                raise
        self._restore_device_rng()

    def _take_device(self) -> None:
        """Detach the twin executor if it holds the IPUs: compiling or running attaches this one, and a
        config that uses every IPU cannot hold two executables (optimum's IPUTrainer detaches too)."""
        twin = self._twin
        if twin is not None and twin._poplar.isAttachedToDevice():
            twin.detach()

    def _device_inputs(self, batch: Batch) -> Batch:
        """The batch as the device takes it: a half model (precision fp16) gets fp32 inputs as fp16,
        as a half model on the host would need them (the cast is the host's, before the transfer)."""
        if self._options.precision != "fp16":
            return batch
        return {key: value.half() if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value
                for key, value in batch.items()}

    def accepts(self, batch: Batch) -> bool:
        """Whether `batch` has the compiled signature (a call would run without compiling)."""
        return self._spec is not None and self._poplar.isCompiled() and self._spec.matches(self._device_inputs(batch))

    def compile_ahead(self, loader: "DataLoader") -> str:
        """Compile the poptorch executable for `loader`'s batch shape (PoplarExecutor.compile builds it
        without running a step); with `executable_cache_dir` set, poptorch saves it there."""
        self.compile_for(loader)
        cache = self._arguments["executable_cache_dir"]
        where = f", cached in {cache}" if cache and cache != "disabled" else " (executable_cache_dir is not set: not cached)"
        mode = "training" if self.training else "inference"
        version = self._arguments["offline_ipu_version"]
        target = (f" for an offline {OFFLINE_IPU_VERSIONS[version]} IPU (ipu_version {version}, no IPU attached)"
                  if self._arguments["compile_only"] else "")
        return f"poptorch compiled the {mode} executable{target}{where}"

    def __call__(self, batch: Batch) -> StepResult:
        """Run one host call on a combined batch of CPU tensors, compiling first if needed."""
        batch = self._device_inputs(batch)
        spec = self._spec
        if spec is None or not self._poplar.isCompiled():
            self.compile(batch)
            spec = self._spec
            assert spec is not None
        elif not spec.matches(batch):
            spec.check(batch)
        if not self._poplar.isAttachedToDevice():
            self._take_device()  # the call re-attaches this executor
        with self._marking_loss:
            outputs = self._poplar(**batch)
        if not isinstance(outputs, dict):
            raise TypeError(f"The model's forward must return a dict of tensors, got {type(outputs).__name__}.")
        marked = self._loss_mark.key if self._loss_mark is not None else None
        loss = outputs.get(marked) if marked is not None else find_loss(outputs, training=False)
        mean_loss = None if loss is None else (loss if loss.dim() == 0 else loss.float().mean())
        return StepResult(outputs, mean_loss, self.updates_per_call, spec.combined_batch)

    # -- poptorch's PoplarExecutor surface --------------------------------------------------------------

    def set_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Send the optimizer's hyperparameters to the device (poptorch's setOptimizer)."""
        if not self.training:
            raise RuntimeError("set_optimizer: an inference executor has no optimizer.")
        if optimizer is not self._host_optimizer:
            require_optimizer_for(self._model, optimizer, True)
            self._host_optimizer = optimizer
            self._device_optimizer = self._convert_optimizer(optimizer)
        else:
            self._send_hyperparameters(optimizer)
        self._poplar.setOptimizer(self._device_optimizer)

    def copy_weights_to_host(self) -> None:
        """Read the device weights into the host model (nothing to do before compile)."""
        if self._poplar.isCompiled():
            self._poplar.copyWeightsToHost()

    def copy_weights_to_device(self) -> None:
        """Upload the host model's weights (nothing to do before compile: compile uploads them)."""
        if self._poplar.isCompiled():
            self._poplar.copyWeightsToDevice()

    def attach(self) -> None:
        """Acquire the IPUs again (poptorch's attachToDevice), detaching the twin executor first."""
        self._take_device()
        self._poplar.attachToDevice()

    def detach(self) -> None:
        """Release the IPUs (poptorch's detachFromDevice, which reads weights back in training)."""
        self._poplar.detachFromDevice()

    @property
    def is_attached(self) -> bool:
        """Whether the executor holds its IPUs."""
        return bool(self._poplar.isAttachedToDevice())

    @property
    def is_compiled(self) -> bool:
        """Whether the program is compiled (and not destroyed)."""
        return bool(self._poplar.isCompiled())

    def destroy(self) -> None:
        """Copy weights to the host and free the executable and the IPUs."""
        self._poplar.destroy()
        self._spec = None
        if self._loss_mark_hook is not None:
            self._loss_mark_hook.remove()
            self._loss_mark_hook = None

    def state_dict(self) -> Dict[str, Any]:
        """The host optimizer's state (its hyperparameters: poptorch never runs the host step), the
        device optimizer state in poptorch's format (read back from the IPU), the host's torch RNG
        states and the device's own RNG state (dropout masks on the IPU draw from it)."""
        host_state = device_state = None
        if self._host_optimizer is not None and self._device_optimizer is not None:
            host_state = self._host_optimizer.state_dict()
            device_state = self._device_optimizer.state_dict()  # poptorch reads this back from the device
        return {"optimizer": host_state, "poptorch_optimizer": device_state, "loss_scaler": {},
                "rng": get_rng_states(torch.device("cpu")), "device_rng": self._read_device_rng()}

    def _read_device_rng(self) -> Optional[Dict[str, Any]]:
        """The device's seed and generator state (PoplarExecutor.rng_state, ``[seed, *state]``; the
        state words are uint32 on an IPU, kept as int64), or the one still waiting for the compile."""
        if not self._poplar.isCompiled():
            return self._device_rng
        seed, *words = self._poplar.rng_state
        return {"seed": int(seed), "state": torch.tensor(words, dtype=torch.int64)}

    def _restore_device_rng(self) -> None:
        """Write a checkpoint's device RNG state to the executable (poptorch's setter needs one compiled)."""
        if self._device_rng is not None and self._poplar.isCompiled():
            self._poplar.rng_state = [self._device_rng["seed"], *self._device_rng["state"].tolist()]
            self._device_rng = None

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore the optimizer (hyperparameters on the host, moments on the device through
        setOptimizer) and the RNG states (the device's once the executable is compiled)."""
        if state.get("optimizer") is not None:
            if self._host_optimizer is None:
                raise ValueError("load_state_dict: the state holds optimizer state, but this executor has no optimizer.")
            self._host_optimizer.load_state_dict(state["optimizer"])
            self._device_optimizer = self._convert_optimizer(self._host_optimizer)
            device_state = state.get("poptorch_optimizer")
            if device_state is not None and device_state.get("ipu_state") is not None:
                self._device_optimizer.load_state_dict(device_state)
            elif self._host_optimizer.state:
                # poptorch loads only its own (ipu_state) format onto the IPU.
                warnings.warn(
                    "The checkpoint's optimizer moments come from another executor; poptorch can load only "
                    "optimizer state saved by poptorch, so the moments restart from zero on the IPU.",
                    stacklevel=2,
                )
            self._poplar.setOptimizer(self._device_optimizer)
        set_rng_states(state.get("rng") or {})
        if state.get("device_rng") is not None:  # absent from checkpoints of other executors
            self._device_rng = state["device_rng"]
            self._restore_device_rng()


_GROUP_KEYS: Dict[str, Tuple[str, ...]] = {
    "SGD": ("lr", "momentum", "dampening", "weight_decay", "nesterov"),
    "Adam": ("lr", "betas", "eps", "weight_decay", "amsgrad"),
    "AdamW": ("lr", "betas", "eps", "weight_decay", "amsgrad"),
    "RMSprop": ("lr", "alpha", "eps", "weight_decay", "momentum", "centered"),
    "LAMB": ("lr", "betas", "eps", "weight_decay", "max_weight_norm"),
}
"""Each poptorch optimizer's per-group attributes (its `_group_vars`, poptorch python/optim.py)."""


def _device_group(group: Dict[str, Any], keys: Tuple[str, ...]) -> Dict[str, Any]:
    """The poptorch attributes of a host parameter group (or the defaults). poptorch refuses None for
    any of them ("Mandatory attribute ... not found in optimizer group"), so a None is left out,
    except LAMB's `max_weight_norm`, whose None (no clipping on the host) poptorch's LAMB itself
    turns into 65500."""
    device = {key: value for key, value in group.items() if key in keys and value is not None}
    if "max_weight_norm" in keys and group.get("max_weight_norm", LAMB_MAX_WEIGHT_NORM) is None:
        device["max_weight_norm"] = LAMB_MAX_WEIGHT_NORM
    return device


class _TrainingLossMark:
    """A forward hook on the model that marks its reported loss (``loss``, or the output marked with
    `ipu_ops.identity_loss`) with `poptorch.identity_loss`, while the training executor's poptorch
    program traces or (on a stand-in) runs the model: inside ``with mark:``.

    poptorch differentiates only identity-loss nodes (and the torch loss functions it lowers to one);
    a loss node used by a later one is folded into it, and exactly one must remain
    (RemoveSurplusIdentityLosses.cpp). Marking the reported loss makes it that one for every model,
    so the device trains on the loss ipuflow reports (a per-row ``cross_entropy(reduction="none")``
    inside it is folded in rather than trained on). `key` is the marked output's name."""

    def __init__(self, poptorch: ModuleType) -> None:
        self._poptorch = poptorch
        self._active = False
        self.key: Optional[str] = None

    def __enter__(self) -> "_TrainingLossMark":
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False

    def __call__(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> Any:
        if not self._active:
            return None
        loss = find_loss(outputs, training=True)
        key = next(name for name, value in outputs.items() if value is loss)
        self.key = key
        return {**outputs, key: self._poptorch.identity_loss(loss, reduction="none")}

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_TrainingLossMark":
        return self  # a copied model (a stand-in's device copy) keeps the executor's hook


def _accumulation_types(name: str, fp16: bool) -> Dict[str, torch.dtype]:
    """The state dtypes optimum-graphcore's IPUTrainer.create_optimizer sets: with a half model the
    gradient accumulator and first moment are fp16 and the second moment fp32; fp32 otherwise.
    SGD's velocity is its first-order state, so it follows the first moment."""
    first = torch.float16 if fp16 else torch.float32
    if name == "SGD":
        return {"accum_type": first, "velocity_accum_type": first}
    return {"accum_type": first, "first_order_momentum_accum_type": first, "second_order_momentum_accum_type": torch.float32}


def _refuse_host_driven_evaluation(model: torch.nn.Module) -> None:
    """A ConfigurationError for a model whose evaluation forward is a host-driven loop: poptorch
    compiles one static graph per executable (values never reach the host while it runs), so it
    could not run, and an IPU run would only find out at its first validation."""
    # Asked by name: execution sits below models (Model.host_driven_evaluation declares it).
    declared = getattr(model, "host_driven_evaluation", None)
    _refuse_host_driven(declared() if callable(declared) else None)


def _refuse_host_driven(driven: Optional[Tuple[str, str]]) -> None:
    """The ConfigurationError for a declared host-driven evaluation, (config key, what it does)."""
    if driven is not None:
        key, what = driven
        raise ConfigurationError(
            f"{what}; the poptorch executor compiles the evaluation forward into one static graph, which cannot "
            f"hold such a loop. Set model.{key} to false with the poptorch executor (validation then reports the "
            "loss only), and generate afterwards on the native executor: ipuflow evaluate ARCHIVE DATA -o "
            f"'{{\"trainer.executor\": {{\"type\": \"native\"}}, \"model.{key}\": true}}' (or ipuflow predict).",
            path=f"model.{key}",
        )


def check_poptorch_optimizer(optimizer_class: type, max_grad_norm: Optional[float] = None) -> str:
    """The poptorch twin's name for `optimizer_class`, or a ConfigurationError naming the supported
    optimizers (or saying that the twin has no gradient clipping)."""
    name = poptorch_twin(optimizer_class)
    if name is None:
        raise ConfigurationError(
            f"the poptorch executor converts the optimizer to its poptorch.optim twin, and "
            f"{optimizer_class.__name__} has none; use one of {', '.join(map(repr, SUPPORTED_OPTIMIZERS))}.",
            path="trainer.optimizer",
        )
    if max_grad_norm is not None and name in ("RMSprop", "LAMB"):
        raise ConfigurationError(
            f"poptorch's {name} has no gradient clipping (only SGD, Adam and AdamW take max_grad_norm); remove it "
            "or use sgd, adam or adamw.",
            path="trainer.executor.max_grad_norm",
        )
    return name


def model_blocks(model: torch.nn.Module) -> List[Tuple[torch.nn.Module, Tuple[Optional[str], Optional[int]]]]:
    """The blocks the model places itself with `ipu_ops.BeginBlock`: (module, (user_id, ipu_id)) in
    the order the model registers its modules."""
    return [(module, getattr(module, BLOCK_ATTRIBUTE)) for module in model.modules() if hasattr(module, BLOCK_ATTRIBUTE)]


def checkpointed(poptorch: ModuleType, output: Any) -> Any:
    """`output` with every tensor in it (nested in tuples, lists or dicts, as transformers' layers
    return them) passed through `poptorch.recomputationCheckpoint`; anything else is kept as it is."""
    if isinstance(output, torch.Tensor):
        return poptorch.recomputationCheckpoint(output)
    if isinstance(output, tuple) and hasattr(output, "_fields"):  # a named tuple
        return type(output)(*(checkpointed(poptorch, value) for value in output))
    if isinstance(output, (tuple, list)):
        return type(output)(checkpointed(poptorch, value) for value in output)
    if isinstance(output, dict):
        return type(output)(**{key: checkpointed(poptorch, value) for key, value in output.items()})
    return output


def _checkpoint_output(poptorch: ModuleType) -> Any:
    def hook(module: torch.nn.Module, inputs: Any, output: Any) -> Any:
        return checkpointed(poptorch, output)

    return hook
