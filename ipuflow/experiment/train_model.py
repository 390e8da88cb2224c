"""TrainModel: the top-level config object of `ipuflow train`, built in dependency order."""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple, Type, Union

import numpy
import torch

from ipuflow.config import ConfigurationError, Lazy, Registrable
from ipuflow.data.loader import DataLoader
from ipuflow.data.readers import DatasetReader
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.distributed import is_primary
from ipuflow.distributed.collectives import barrier
from ipuflow.evaluation.example_scoring import ExampleScoring
from ipuflow.evaluation.inference import evaluation_loader
from ipuflow.evaluation.postprocessor import Postprocessor
from ipuflow.execution.executor import StepExecutor
from ipuflow.experiment.report_to import with_tracker_callbacks
from ipuflow.experiment.serialization_dir import VOCABULARY_DIR
from ipuflow.experiment.validation_sets import (
    dataset_paths, expand_validation, path_key, set_name, validation_datasets,
)
from ipuflow.experiment.vocabulary_sources import counted_for_vocabulary, non_padded_patterns, refuse_unseen_labels
from ipuflow.models.model import Model
from ipuflow.training.loop.trainer import Trainer

logger = logging.getLogger(__name__)

DATASET_NAMES = ("train", "validation", "test")


def seed_everything(random_seed: Optional[int], numpy_seed: Optional[int], pytorch_seed: Optional[int]) -> None:
    """Seed Python's, NumPy's and torch's generators (each skipped when None)."""
    if random_seed is not None:
        random.seed(random_seed)
    if numpy_seed is not None:
        numpy.random.seed(numpy_seed)
    if pytorch_seed is not None:
        torch.manual_seed(pytorch_seed)


def _block_type(config: Any, base: Any) -> Optional[type]:
    """The class a config block (a dict, or a bare type name) of registrable `base` names, or None."""
    if isinstance(config, str):
        config = {"type": config}
    name = config.get("type", base.default_implementation) if isinstance(config, dict) else None
    if not isinstance(name, str):
        return None
    try:
        found = base.resolve_class_name(name)[0]
    except (ConfigurationError, TypeError, ValueError):
        return None
    return found if isinstance(found, type) else None


def _executor_class(trainer_config: Dict[str, Any]) -> Optional[Type[StepExecutor]]:
    """The executor class `trainer_config` names, or None where building would report the block."""
    found = _block_type(trainer_config.get("executor") or {}, StepExecutor)
    return found if found is not None and issubclass(found, StepExecutor) else None


def check_executor_runs_optimizer(trainer_config: Dict[str, Any]) -> None:
    """Refuse, from the trainer config alone (before any data is read), an optimizer the configured
    executor cannot run (the poptorch executor converts only optimizers with a poptorch.optim twin)."""
    from ipuflow.training.optim.optimizers import Optimizer

    executor_class = _executor_class(trainer_config)
    optimizer_class = _block_type(trainer_config.get("optimizer") or {}, Optimizer)
    if executor_class is None or optimizer_class is None:
        return
    executor_config = trainer_config.get("executor")
    max_grad_norm = executor_config.get("max_grad_norm") if isinstance(executor_config, dict) else None
    grad_norm = trainer_config.get("grad_norm")
    if max_grad_norm is None and not isinstance(grad_norm, bool) and isinstance(grad_norm, (int, float)):
        max_grad_norm = float(grad_norm)
    executor_class.check_optimizer(optimizer_class, max_grad_norm)


def check_executor_runs_model(trainer_config: Dict[str, Any], model_config: Any) -> None:
    """Refuse, from the config alone (before any data is read), a model the configured executor cannot
    run (poptorch: generation in evaluation)."""
    executor_class = _executor_class(trainer_config)
    model_class = _block_type(model_config, Model)
    if executor_class is not None and model_class is not None and isinstance(model_config, dict):
        executor_class.check_model(model_class, model_config)


def check_executor_available(trainer_config: Dict[str, Any]) -> None:
    """Refuse, before any data is read, an executor whose backend cannot be imported here (poptorch
    without the Poplar SDK); a dry run does not ask, it plans such a run on the CPU."""
    executor_class = _executor_class(trainer_config)
    if executor_class is not None:
        try:
            executor_class.check_available()
        except ConfigurationError as error:
            raise error.locate("trainer.executor.") from None


def read_datasets(dataset_reader: DatasetReader, validation_dataset_reader: Optional[DatasetReader],
                  paths: Dict[str, Optional[str]], with_metadata: bool) -> Dict[str, Any]:
    """{name: columnar dataset} for every given path (`train` read by `dataset_reader`, the others by
    `validation_dataset_reader` if given); `with_metadata` keeps the evaluation sets' metadata fields."""
    evaluation_reader = validation_dataset_reader or dataset_reader
    datasets: Dict[str, Any] = {}
    for name, path in paths.items():
        if path is None:
            continue
        reader = dataset_reader if name == "train" else evaluation_reader
        started = time.perf_counter()
        try:
            # Columnar and memory-mapped, from the data cache when this reader has read this file before.
            # A postprocessor reads the evaluation sets' metadata fields (example ids, offsets, answers).
            datasets[name] = reader.read_columnar(path, metadata=with_metadata and name != "train")
        except ConfigurationError as error:
            if error.location is None:  # about the file itself (missing, a directory): the key naming it
                raise ConfigurationError(error.reason, key=path_key(name), expected=error.expected,
                                         found=error.found) from None
            # A reader names its keys relative to itself; reading happens outside the resolver.
            error.locate("validation_dataset_reader." if reader is validation_dataset_reader else "dataset_reader.")
            raise
        logger.info("Read %d %s instances from %s in %.1fs", len(datasets[name]), name, path,
                    time.perf_counter() - started)
        if not datasets[name]:
            raise ConfigurationError(f"{path} holds no instances.", key=path_key(name))
    return datasets


def build_vocabulary(vocabulary: Lazy[Vocabulary], datasets: Dict[str, Any], datasets_for_vocab_creation: Optional[List[str]],
                     vocab_dir: Path) -> Vocabulary:
    """The run's vocabulary: the one saved in `vocab_dir` when recovering a run, else one built from
    `datasets_for_vocab_creation` (default: every dataset read) and saved there."""
    datasets_for_vocab_creation = expand_validation(datasets_for_vocab_creation, list(datasets))
    for_vocab = datasets_for_vocab_creation if datasets_for_vocab_creation is not None else list(datasets)
    unknown = [name for name in for_vocab if name not in datasets]
    if unknown:
        raise ConfigurationError(
            f"{unknown} are not among the datasets this config reads ({', '.join(datasets)}).",
            key="datasets_for_vocab_creation",
        )
    saved_vocabulary = vocab_dir.is_dir() and any(vocab_dir.iterdir())
    barrier()  # under torchrun every rank has looked before rank 0 writes the vocabulary
    if saved_vocabulary:
        # Recovering a run: keep its vocabulary, so that token ids match its checkpoints even if
        # the data files have changed since.
        vocab = Vocabulary.from_files(str(vocab_dir))
        logger.info("Loaded the run's vocabulary from %s", vocab_dir)
        return vocab
    # Each columnar dataset counts its items as its instances would (from its stored counts).
    counted = counted_for_vocabulary(datasets, datasets_for_vocab_creation, non_padded_patterns(vocabulary.params))
    vocab = vocabulary.construct(instances=counted)
    if is_primary():
        vocab.save_to_files(str(vocab_dir))
    return vocab


def check_run_before_reading(trainer: Dict[str, Any], model: Dict[str, Any], evaluate_on_test: bool,
                             test_data_path: Optional[str]) -> None:
    """Refuse, before any data is read, a run whose executor cannot run its optimizer or model, or
    that asks for a test evaluation without test data."""
    check_executor_runs_optimizer(trainer)
    check_executor_runs_model(trainer, model)
    if evaluate_on_test and test_data_path is None:
        raise ConfigurationError("true needs a test_data_path.", key="evaluate_on_test")


def build_loaders(data_loader: Lazy[DataLoader], validation_data_loader: Optional[Lazy[DataLoader]],
                  indexed: Dict[str, Any], readers: Tuple[DatasetReader, DatasetReader]
                  ) -> Tuple[DataLoader, Any, Optional[DataLoader]]:
    """The training loader, the validation loader (or {name: loader} for several sets; None without
    validation data) and the test loader (None without its data); the evaluation loaders follow
    `validation_data_loader`'s config, else `data_loader`'s, each with its reader's batch transform
    (`readers`: the training data's and the others')."""
    train_loader = data_loader.construct(instances=indexed["train"], batch_transform=readers[0].batch_transform())
    evaluation_config = (validation_data_loader or data_loader).params

    def loader_for(name: str) -> DataLoader:
        return evaluation_loader(evaluation_config, indexed[name], batch_transform=readers[1].batch_transform())

    validation = {set_name(name): loader_for(name) for name in validation_datasets(list(indexed))}
    test_loader = loader_for("test") if "test" in indexed else None
    return train_loader, validation.get("", validation or None), test_loader


def validation_examples(postprocessor: Optional[Postprocessor], datasets: Dict[str, Any], model: Model) -> Any:
    """How validations score examples with `postprocessor`: one `ExampleScoring`, or {name: scoring}
    for several sets (None without a postprocessor or validation data)."""
    if postprocessor is None:
        return None
    examples = {set_name(name): ExampleScoring(postprocessor, datasets[name].instances(), model)
                for name in validation_datasets(list(datasets))}
    return examples.get("", examples or None)


def check_trainer_takes_examples(trainer: Trainer, examples: Optional[ExampleScoring]) -> None:
    """Refuse a top-level postprocessor that the configured trainer cannot score its validations with."""
    if examples is not None and getattr(trainer, "validation_examples", None) is not examples:
        raise ConfigurationError(
            f"{type(trainer).__name__} cannot post-process its validations (it takes no validation_examples); "
            "use the gradient_descent trainer, or remove the top-level postprocessor (ipuflow evaluate takes one "
            "with -o).", key="postprocessor")


class TrainModel(Registrable):
    """Everything one experiment builds: data, vocabulary, model, loaders and trainer.

    Config keys: `dataset_reader`, `validation_dataset_reader`, `train_data_path`,
    `validation_data_path`, `test_data_path`, `evaluate_on_test`, `vocabulary`,
    `datasets_for_vocab_creation`, `model`, `data_loader`, `validation_data_loader`, `trainer`,
    `random_seed`, `numpy_seed`, `pytorch_seed`, `report_to`.
    """

    replaced_keys: ClassVar[Dict[str, str]] = {
        "distributed": "is AllenNLP's way to train on several devices (cuda_devices, one spawned worker each); ipuflow "
                       "uses torchrun instead: remove the block and run `torchrun --nproc_per_node N -m ipuflow train "
                       "CONFIG -s DIR` (one process per device; trainer.executor.distributed_backend picks nccl or "
                       "gloo), or simulate N replicas in one process with trainer.executor.replication_factor.",
    }
    """AllenNLP top-level keys, each refused with what replaces it in ipuflow."""

    default_implementation = "default"

    def __init__(
        self,
        serialization_dir: str,
        model: Model,
        trainer: Trainer,
        vocab: Vocabulary,
        datasets: Dict[str, Any],
        test_data_loader: Optional[DataLoader] = None,
        evaluate_on_test: bool = False,
        postprocessor: Optional[Postprocessor] = None,
    ) -> None:
        self.serialization_dir = Path(serialization_dir)
        self.model = model
        self.trainer = trainer
        self.vocab = vocab
        self.datasets = datasets
        self.test_data_loader = test_data_loader
        self.evaluate_on_test = evaluate_on_test
        self.postprocessor = postprocessor

    @classmethod
    def from_partial_objects(
        cls,
        serialization_dir: str,
        dataset_reader: DatasetReader,
        train_data_path: str,
        model: Lazy[Model],
        data_loader: Lazy[DataLoader],
        trainer: Lazy[Trainer],
        vocabulary: Lazy[Vocabulary] = Lazy(Vocabulary),
        datasets_for_vocab_creation: Optional[List[str]] = None,
        validation_dataset_reader: Optional[DatasetReader] = None,
        validation_data_path: Optional[Union[str, Dict[str, str]]] = None,
        validation_data_loader: Optional[Lazy[DataLoader]] = None,
        test_data_path: Optional[str] = None,
        evaluate_on_test: bool = False,
        random_seed: Optional[int] = 13370,
        numpy_seed: Optional[int] = 1337,
        pytorch_seed: Optional[int] = 133,
        postprocessor: Optional[Lazy[Postprocessor]] = None,
        report_to: Optional[Union[str, List[str]]] = None,
    ) -> "TrainModel":
        """Read the data, build the vocabulary, the model, the loaders and the trainer, in that order.

        dataset_reader: reads `train_data_path` (and the other paths unless
            `validation_dataset_reader` is given).
        validation_data_path: the data scored at every validation, or a mapping from names to paths
            (several sets: each scored, its metrics named validation_<name>_<metric>, and
            trainer.validation_metric may name one, e.g. "+<name>_accuracy").
        datasets_for_vocab_creation: which of train/validation/test the vocabulary is built from
            (default: the tokens of all that are given, the labels of the training data; a label
            that only another dataset has is then an error naming it).
        evaluate_on_test: after training, score the best model on `test_data_path`.
        random_seed: seeds Python's `random` (null skips seeding); numpy_seed and pytorch_seed likewise.
        postprocessor: maps the outputs of a dataset's instances back to its examples and scores those
            (e.g. `squad_answers`, `grouped_vote`): at every validation, on the test set, in
            `ipuflow evaluate` and `ipuflow predict`; its metrics join the model's.
        report_to: experiment trackers to log to, e.g. ["tensorboard", "mlflow"] (adds their
            callbacks to trainer.callbacks; choices: tensorboard, wandb, mlflow).
        """
        trainer = with_tracker_callbacks(trainer, report_to)
        seed_everything(random_seed, numpy_seed, pytorch_seed)
        check_run_before_reading(trainer.params.as_dict(), model.params.as_dict(), evaluate_on_test, test_data_path)
        paths = dataset_paths(train_data_path, validation_data_path, test_data_path)
        datasets = read_datasets(dataset_reader, validation_dataset_reader, paths, postprocessor is not None)
        vocab = build_vocabulary(vocabulary, datasets, datasets_for_vocab_creation,
                                 Path(serialization_dir) / VOCABULARY_DIR)
        refuse_unseen_labels(datasets, paths, vocab)
        built_model = model.construct(vocab=vocab, serialization_dir=serialization_dir)
        indexed = {name: dataset.indexed(vocab) for name, dataset in datasets.items()}
        train_loader, validation_loader, test_loader = build_loaders(
            data_loader, validation_data_loader, indexed, (dataset_reader, validation_dataset_reader or dataset_reader))
        built_postprocessor = postprocessor.construct(vocab=vocab) if postprocessor is not None else None
        examples = validation_examples(built_postprocessor, datasets, built_model)
        built_trainer = trainer.construct(model=built_model, serialization_dir=serialization_dir, data_loader=train_loader,
                                          validation_data_loader=validation_loader, validation_examples=examples)
        check_trainer_takes_examples(built_trainer, examples)
        return cls(serialization_dir, built_model, built_trainer, vocab, datasets, test_loader, evaluate_on_test,
                   built_postprocessor)

    def run(self, on_phase: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
        """Train, then score the best model on the test set when asked; return the final metrics.

        What the run's status records as done is not done again: a run whose training finished only
        has its test evaluation left (if that). `on_phase` hears "training" and "test evaluation"
        as they begin."""
        if on_phase is not None:
            on_phase("training")
        metrics = dict(self.trainer.train())
        status = self.trainer.run_status
        if self.evaluate_on_test and self.test_data_loader is not None and not status.test_evaluated:
            if on_phase is not None:
                on_phase("test evaluation")
            logger.info("Evaluating the best model on the test set")
            executor = self.trainer.executor.inference_executor()
            executor.prepare(self.test_data_loader)
            examples = None if self.postprocessor is None else ExampleScoring(
                self.postprocessor, self.datasets["test"].instances(), self.model)
            test_metrics = self.trainer.evaluate_test_set(executor, self.test_data_loader, examples)
            metrics.update({f"test_{key}": value for key, value in test_metrics.items()})
            if status.training_finished:
                status.metrics.update({f"test_{key}": value for key, value in test_metrics.items()})
                status.test_evaluated = True
                self.trainer.record_run_status(status)
        return metrics

    def describe(self) -> Dict[str, Any]:
        """What `--dry-run` reports: dataset and vocabulary sizes, parameters, batches, executor plan."""
        parameters = sum(p.numel() for p in self.model.parameters())
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        executor = self.trainer.executor
        loader = self.trainer.data_loader
        return {
            "datasets": {name: len(instances) for name, instances in self.datasets.items()},
            "vocabulary": {namespace: self.vocab.get_vocab_size(namespace) for namespace in self.vocab.get_namespaces()},
            "parameters": parameters,
            "trainable_parameters": trainable,
            "executor": self._executor_plan(executor),
            "batch_size_factor": executor.batch_size_factor,
            "combined_batch_size": loader.combined_batch_size,
            "padding": loader.padding_plan(),
            "host_calls_per_epoch": len(loader),
            "optimizer_updates_per_epoch": len(loader) * executor.updates_per_call,
        }


    @staticmethod
    def _executor_plan(executor: Any) -> Dict[str, Any]:
        """The executor's backend, device and batching options, as `--dry-run` shows them."""
        options = dataclasses.asdict(executor.options)
        plan = {"backend": StepExecutor.registered_name(type(executor)) or type(executor).__name__,
                "device": str(executor.device)}
        plan.update({key: value for key, value in options.items() if value is not None and key != "training"})
        plan["optimizer_updates_per_call"] = executor.updates_per_call
        return plan


TrainModel.register("default", constructor="from_partial_objects")(TrainModel)
