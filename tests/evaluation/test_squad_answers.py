"""SQuAD answer scoring (official normalisation) and the squad_answers postprocessor's span search."""

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.fields import MetadataField
from ipuflow.data.instance import Instance
from ipuflow.evaluation.answer_scores import best_over_golds, exact_match, normalize_answer, token_f1
from ipuflow.evaluation.postprocessor import Postprocessor


def test_normalisation_follows_the_official_squad_script():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert exact_match("the Eiffel tower.", "Eiffel Tower") == 1.0
    assert token_f1("Eiffel Tower in Paris", "the Eiffel Tower") == pytest.approx(2 * (2 / 4) * 1.0 / (2 / 4 + 1.0))
    assert token_f1("", "") == 1.0 and token_f1("paris", "") == 0.0
    assert best_over_golds(exact_match, "", []) == 1.0  # unanswerable: only the empty answer is right
    assert best_over_golds(token_f1, "red car", ["blue car", "red car"]) == 1.0


def window(example_id, context, offsets, answers=("code",)):
    return Instance({"example_id": MetadataField(example_id), "offsets": MetadataField(offsets),
                     "context": MetadataField(context), "answers": MetadataField(list(answers))})


def test_the_best_span_over_all_windows_wins_and_spans_outside_the_context_are_skipped():
    context = "alpha beta gamma delta"
    # Two windows of one question: tokens 0 and 1 are special/question tokens (no offsets).
    first = window("q", context, [None, None, [0, 5], [6, 10]])
    second = window("q", context, [None, None, [11, 16], [17, 22]])
    outputs = [
        {"start_logits": [0.0, 9.0, 1.0, 0.5], "end_logits": [0.0, 9.0, 0.2, 1.0]},  # best pair: alpha..beta = 2.0
        {"start_logits": [0.0, 0.0, 3.0, 0.0], "end_logits": [0.0, 0.0, 0.0, 2.5]},  # gamma..delta = 5.5
    ]
    processor = Postprocessor.from_params(Params({"type": "squad_answers"}))
    [prediction] = processor(outputs, [first, second])
    assert prediction["answer"] == "gamma delta" and prediction["score"] == pytest.approx(5.5)
    assert prediction["gold"] == ["code"]


def test_max_answer_length_and_end_before_start_are_respected():
    context = "a b c d"
    offsets = [None, [0, 1], [2, 3], [4, 5], [6, 7]]
    outputs = [{"start_logits": [0, 5, 0, 0, 0], "end_logits": [0, 0, 0, 0, 5]}]
    short = Postprocessor.from_params(Params({"type": "squad_answers", "max_answer_length": 2}))
    [prediction] = short([dict(outputs[0])], [window("q", context, offsets)])
    assert len(prediction["answer"].split()) <= 2
    backwards = [{"start_logits": [0, 0, 0, 0, 5], "end_logits": [0, 5, 0, 0, 0]}]
    [prediction] = short(backwards, [window("q", context, offsets)])
    assert prediction["answer"] in {"d", "a", "b", "c", "a b", "b c", "c d"}


def test_version_2_predicts_no_answer_when_the_null_score_wins_by_the_threshold():
    context = "red blue"
    offsets = [None, [0, 3], [4, 8]]
    outputs = [{"start_logits": [4.0, 1.0, 0.0], "end_logits": [4.0, 1.0, 0.0]}]  # null 8.0 vs span 2.0
    v2 = Postprocessor.from_params(Params({"type": "squad_answers", "version_2_with_negative": True}))
    [prediction] = v2(outputs, [window("q", context, offsets, answers=())])
    assert prediction["answer"] == ""
    assert v2.metrics([prediction], []) == {"exact_match": 1.0, "f1": 1.0}
    lenient = Postprocessor.from_params(Params({"type": "squad_answers", "version_2_with_negative": True,
                                                "null_score_diff_threshold": 10.0}))
    [prediction] = lenient(outputs, [window("q", context, offsets, answers=())])
    assert prediction["answer"] == "red"
    v1 = Postprocessor.from_params(Params({"type": "squad_answers"}))
    assert v1(outputs, [window("q", context, offsets)])[0]["answer"] == "red"  # v1.1 always answers


def test_a_model_without_span_scores_is_a_clear_error():
    processor = Postprocessor.from_params(Params({"type": "squad_answers"}))
    with pytest.raises(ConfigurationError, match="start_logits and end_logits"):
        processor([{"probs": [0.5, 0.5]}], [window("q", "x", [None])])
