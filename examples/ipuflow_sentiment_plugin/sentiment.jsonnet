// The worked plugin of docs/extending.md on the shipped Rotten Tomatoes data. From the repository root:
//   PYTHONPATH=examples/ipuflow_sentiment_plugin ipuflow train \
//     examples/ipuflow_sentiment_plugin/sentiment.jsonnet -s runs/sentiment --include-package sentiment_plugin
local data_dir = "data/rotten_tomatoes/";
{
  dataset_reader: { type: "sentiment_lines", max_tokens: 48 },
  train_data_path: data_dir + "train.jsonl",
  validation_data_path: data_dir + "validation.jsonl",
  vocabulary: { min_count: { tokens: 2 } },
  model: { type: "mean_pool_classifier", embedding_dim: 64, balanced: { type: "balanced_accuracy" } },
  data_loader: { batch_size: 32, shuffle: true, max_length: 48 },
  trainer: {
    num_epochs: 6,
    patience: 2,
    validation_metric: "+balanced",
    optimizer: { type: "adamw", lr: 0.01 },
    callbacks: [{ type: "epoch_log" }],
  },
  random_seed: 1,
  numpy_seed: 1,
  pytorch_seed: 1,
}
