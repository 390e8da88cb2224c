// The quickstart: a bag-of-embeddings classifier on the Rotten Tomatoes snippets shipped in data/.
// Trains in well under a minute on 2 CPU cores (about 5 s of training):  ipuflow train configs/quickstart.jsonnet -s runs/quickstart
local data_dir = "data/rotten_tomatoes/";
local embedding_dim = 128;
local max_tokens = 48;

{
  dataset_reader: {
    type: "text_classification_json",
    tokenizer: { type: "regex", lowercase: true },
    max_tokens: max_tokens,
  },
  train_data_path: data_dir + "train.jsonl",
  validation_data_path: data_dir + "validation.jsonl",
  test_data_path: data_dir + "test.jsonl",
  evaluate_on_test: true,
  vocabulary: { min_count: { tokens: 2 } },
  model: {
    type: "basic_classifier",
    embedding_dim: embedding_dim,
    encoder: { type: "bag_of_embeddings", averaged: true },
    dropout: 0.5,
  },
  data_loader: { batch_size: 32, shuffle: true, max_length: max_tokens },
  trainer: {
    num_epochs: 8,
    patience: 3,
    validation_metric: "+accuracy",
    optimizer: { type: "adamw", lr: 0.005, weight_decay: 0.01 },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_steps: 50 },
    executor: { type: "native", device: "cpu" },
  },
  random_seed: 13370,
  numpy_seed: 1337,
  pytorch_seed: 133,
}
