"""The `generation_scores` postprocessor: generated texts scored against their targets (ROUGE, exact match)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Sequence, Tuple

from ipuflow.config import ConfigurationError
from ipuflow.config.requirements import PackageRequirement
from ipuflow.evaluation.answer_scores import exact_match
from ipuflow.evaluation.postprocessor import Postprocessor

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def rouge_scorer(use_stemmer: bool) -> Any:
    """A `rouge_score` scorer of ROUGE-1, ROUGE-2 and ROUGE-L."""
    try:
        from rouge_score import rouge_scorer as scorers
    except ImportError:
        raise ConfigurationError("generation_scores needs the rouge-score package: pip install 'ipuflow[seq2seq]'.",
                                 key="postprocessor") from None
    return scorers.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)


def score_texts(generated: Sequence[str], targets: Sequence[str], use_stemmer: bool = True) -> Dict[str, float]:
    """Mean ROUGE-1/2/L F-measures (`rouge1`, `rouge2`, `rougeL`) and `exact_match` (after SQuAD's
    normalisation) of `generated` texts against their `targets`, as fractions."""
    if not targets:
        return {}
    scorer = rouge_scorer(use_stemmer)
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for text, target in zip(generated, targets):
        for name, score in scorer.score(target, text).items():
            totals[name] += score.fmeasure
    metrics = {name: total / len(targets) for name, total in totals.items()}
    metrics["exact_match"] = sum(exact_match(text, target) for text, target in zip(generated, targets)) / len(targets)
    return metrics


@Postprocessor.register("generation_scores")
class GenerationScores(Postprocessor):
    """Scores a sequence-to-sequence model's generated text (`generated_text`, as `seq2seq_generator`
    gives it when it validates by generating) against each instance's `target` text (the `seq2seq`
    reader's metadata): `rouge1`, `rouge2`, `rougeL` (F-measures of Google's `rouge-score`, with
    Porter stemming unless `use_stemmer` is false) and `exact_match`, as fractions. Predictions are
    `{"source", "generated", "target"}` per example."""

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (PackageRequirement("rouge_score", "rouge-score", "seq2seq"),)

    def __init__(self, use_stemmer: bool = True) -> None:
        self.use_stemmer = use_stemmer

    def metric_names(self) -> List[str]:
        """`rouge1`, `rouge2`, `rougeL`, `exact_match`."""
        return [*ROUGE_TYPES, "exact_match"]

    def __call__(self, outputs: List[Dict[str, Any]], instances: Sequence[Any]) -> List[Dict[str, Any]]:
        """Each instance's generated text with its source and target."""
        predictions = []
        for output, instance in zip(outputs, instances):
            if "generated_text" not in output:
                raise ConfigurationError(
                    f"generation_scores needs the model's generated_text (a seq2seq_generator that generates when "
                    f"it validates); the outputs have {', '.join(output)}.", key="postprocessor")
            prediction = {"generated": output["generated_text"]}
            for name in ("source", "target"):
                if name in instance:
                    prediction[name] = instance[name].value
            predictions.append(prediction)
        return predictions

    def metrics(self, predictions: List[Dict[str, Any]], instances: Sequence[Any]) -> Dict[str, float]:
        """ROUGE and exact match over the predictions that have a target."""
        scored = [p for p in predictions if p.get("target") is not None]
        return score_texts([p["generated"] for p in scored], [p["target"] for p in scored], self.use_stemmer)
