// scikit-learn's bundled 8x8 digits (shipped as JSON lines in data/digits/) with a small
// feed-forward network. It shows a non-text task and device_iterations > 1: each host call runs
// 4 optimizer updates on 4 micro-batches of 16, and the learning-rate schedule counts updates.
local data_dir = "data/digits/";

{
  dataset_reader: { type: "tensor_classification" },
  train_data_path: data_dir + "train.jsonl",
  validation_data_path: data_dir + "validation.jsonl",
  test_data_path: data_dir + "test.jsonl",
  evaluate_on_test: true,
  model: {
    type: "feedforward_classifier",
    input_dim: 64,
    hidden_dims: [128, 64],
    activation: "relu",
    dropout: 0.1,
  },
  data_loader: { batch_size: 16, shuffle: true },
  trainer: {
    num_epochs: 30,
    patience: 8,
    validation_metric: "+accuracy",
    optimizer: { type: "adam", lr: 0.003 },
    learning_rate_scheduler: { type: "cosine_with_warmup", warmup_steps: 40 },
    executor: { type: "native", device_iterations: 4 },
  },
}
