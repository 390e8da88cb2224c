"""`ipuflow components BASE NAME`: the config keys of one component, as a new user reads them."""

from ipuflow.commands.cli import run


def components(capsys, *args):
    assert run(["components", *args]) == 0
    return capsys.readouterr().out


def test_an_object_default_shows_its_registered_name_not_a_repr(capsys):
    out = components(capsys, "dataset_reader", "text_classification_json")
    assert " at 0x" not in out
    assert 'tokenizer: a Tokenizer (a registered name or an object with "type") = "whitespace"' in out


def test_a_default_implementation_is_named(capsys):
    out = components(capsys, "trainer", "gradient_descent")
    assert 'optimizer: an Optimizer (a registered name or an object with "type") = "adam" (the default implementation)' in out
    assert 'executor: a StepExecutor (a registered name or an object with "type") = "native" (the default implementation)' in out
    assert 'encoder: a Seq2VecEncoder (a registered name or an object with "type") = "bag_of_embeddings" (the default ' \
           'implementation)' in components(capsys, "model", "basic_classifier")


def test_nested_collection_types_read_as_english(capsys):
    out = components(capsys, "vocabulary", "from_instances")
    assert "stringss" not in out
    assert "tokens_to_add: an object whose values are lists of strings or null" in out


def test_a_parameter_doc_that_wraps_is_shown_whole(capsys):
    out = components(capsys, "train_model", "default")
    assert "dataset_reader: a DatasetReader" in out
    line = next(line for line in out.splitlines() if line.strip().startswith("dataset_reader:"))
    assert line.endswith("reads `train_data_path` (and the other paths unless `validation_dataset_reader` is given).")



def test_every_built_in_callback_documents_itself_and_each_of_its_keys(capsys):
    from ipuflow.commands.components import describe_component
    from ipuflow.training import BatchCallback, EpochCallback, TrainerCallback

    for base in (TrainerCallback, BatchCallback, EpochCallback):
        # Only ipuflow's own: other test modules register helper callbacks in the same process.
        built_ins = [name for name in base.list_available()
                     if base.resolve_class_name(name)[0].__module__.startswith("ipuflow.")]
        for name in built_ins:
            out = components(capsys, base.__name__, name)
            assert out.splitlines()[1].strip(), f"{base.__name__} {name!r} has no summary"
            undocumented = [row["key"] for row in describe_component(base, name) if not row["injected"] and not row["doc"]]
            assert not undocumented, f"{base.__name__} {name!r}: keys without docs: {undocumented}"
