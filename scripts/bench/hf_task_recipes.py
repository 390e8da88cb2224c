#!/usr/bin/env python3
"""The Hugging Face Trainer's standard recipes for scripts/bench/tasks.py, at the Trainer's defaults.

  ner  run_ner.py (examples/pytorch/token-classification): words tokenized with
       `is_split_into_words`, truncated at `max_seq_length`, unpadded; the first sub-word of a word
       carries its tag and the others -100 (`label_all_tokens` false); DataCollatorForTokenClassification
       pads each batch to its own longest; AutoModelForTokenClassification; seqeval for the metric.
  rt   run_glue.py (examples/pytorch/text-classification) on a JSON file: one text column, labels
       sorted and numbered; `pad_to_max_length` true (its default) pads every example to
       `max_seq_length` and default_data_collator stacks them; AutoModelForSequenceClassification.

  headlines  run_summarization.py's Seq2SeqTrainer with a BERT2BERT model (as ipuflow's config):
       EncoderDecoderModel warm-started from MiniLM as encoder and decoder, tied; sources cut to
       `max_seq_length` pieces and headlines to 24, unpadded; DataCollatorForSeq2Seq pads each batch
       (labels with -100); predict_with_generate with 2 beams and at most 20 new tokens; ROUGE-L
       (rouge-score, stemmed) on the test set.

TrainingArguments stay at their defaults but for what the task fixes (output_dir, epochs, batch size,
learning rate, seed) and `report_to: none`: the Trainer's optimizer (AdamW, fused where torch has
it), linear decay without warm-up, no weight decay, grad-norm clipping at 1.0, no evaluation while
training, a checkpoint every 500 updates. After training, as the scripts do with --do_eval
--do_predict: save_model, evaluate on the validation file, predict on the test file.

Usage (tasks.py runs it): python hf_task_recipes.py TASK DATA_DIR OUT_DIR --epochs E --batch-size B
--lr LR --max-length L. Prints one JSON line: training_seconds (train_runtime), updates, the metric.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def token_classification(args, model_path):
    """run_ner's recipe; returns (trainer, test dataset, metric function of the test predictions)."""
    import numpy
    from datasets import Dataset
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2
    from transformers import (AutoModelForTokenClassification, AutoTokenizer, DataCollatorForTokenClassification,
                              Trainer, TrainingArguments)

    splits = {name: read_jsonl(os.path.join(args.data, f"{name}.jsonl")) for name in ("train", "validation", "test")}
    label_list = sorted({tag for example in splits["train"] for tag in example["tags"]})
    label_to_id = {label: index for index, label in enumerate(label_list)}
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForTokenClassification.from_pretrained(
        model_path, num_labels=len(label_list), label2id=label_to_id, id2label=dict(enumerate(label_list)))

    def tokenize_and_align_labels(examples):
        encoded = tokenizer(examples["tokens"], truncation=True, max_length=args.max_length, is_split_into_words=True)
        labels = []
        for index, tags in enumerate(examples["tags"]):
            previous, row = None, []
            for word in encoded.word_ids(batch_index=index):
                row.append(-100 if word is None or word == previous else label_to_id[tags[word]])
                previous = word
            labels.append(row)
        encoded["labels"] = labels
        return encoded

    datasets = {name: Dataset.from_list(rows).map(tokenize_and_align_labels, batched=True, remove_columns=["tokens", "tags"])
                for name, rows in splits.items()}
    trainer = Trainer(model=model, args=training_arguments(args, TrainingArguments), train_dataset=datasets["train"],
                      eval_dataset=datasets["validation"], data_collator=DataCollatorForTokenClassification(tokenizer),
                      processing_class=tokenizer)

    def entity_f1(predictions, label_ids):
        predicted = numpy.argmax(predictions, axis=2)
        gold_rows = [[label_list[g] for p, g in zip(prow, grow) if g != -100] for prow, grow in zip(predicted, label_ids)]
        predicted_rows = [[label_list[p] for p, g in zip(prow, grow) if g != -100] for prow, grow in zip(predicted, label_ids)]
        return {"entity_f1": f1_score(gold_rows, predicted_rows, mode="strict", scheme=IOB2)}

    return trainer, datasets["test"], entity_f1


def sequence_classification(args, model_path):
    """run_glue's recipe on JSON files (one text column); returns as `token_classification`."""
    import numpy
    from datasets import Dataset
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments,
                              default_data_collator)

    splits = {name: read_jsonl(os.path.join(args.data, f"{name}.jsonl")) for name in ("train", "validation", "test")}
    label_list = sorted({example["label"] for example in splits["train"]})
    label_to_id = {label: index for index, label in enumerate(label_list)}
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path, num_labels=len(label_list), label2id=label_to_id, id2label=dict(enumerate(label_list)))

    def preprocess(examples):
        encoded = tokenizer(examples["text"], padding="max_length", max_length=args.max_length, truncation=True)
        encoded["label"] = [label_to_id[label] for label in examples["label"]]
        return encoded

    datasets = {name: Dataset.from_list(rows).map(preprocess, batched=True, remove_columns=["text"])
                for name, rows in splits.items()}
    trainer = Trainer(model=model, args=training_arguments(args, TrainingArguments), train_dataset=datasets["train"],
                      eval_dataset=datasets["validation"], data_collator=default_data_collator, processing_class=tokenizer)

    def accuracy(predictions, label_ids):
        return {"accuracy": float((numpy.argmax(predictions, axis=1) == label_ids).mean())}

    return trainer, datasets["test"], accuracy


def headline_generation(args, model_path):
    """run_summarization's recipe with a BERT2BERT model; returns as `token_classification`."""
    import numpy
    from datasets import Dataset
    from rouge_score.rouge_scorer import RougeScorer
    from transformers import (AutoTokenizer, DataCollatorForSeq2Seq, EncoderDecoderModel, Seq2SeqTrainer,
                              Seq2SeqTrainingArguments)

    splits = {name: read_jsonl(os.path.join(args.data, f"{name}.jsonl")) for name in ("train", "validation", "test")}
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = EncoderDecoderModel.from_encoder_decoder_pretrained(model_path, model_path, tie_encoder_decoder=True)
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = tokenizer.cls_token_id
        config.eos_token_id = tokenizer.sep_token_id
        config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.num_beams = 2
    model.generation_config.max_new_tokens = 20

    def preprocess(examples):
        encoded = tokenizer(examples["source"], max_length=args.max_length, truncation=True)
        encoded["labels"] = tokenizer(text_target=examples["target"], max_length=24, truncation=True)["input_ids"]
        return encoded

    datasets = {name: Dataset.from_list([{"source": r["source"], "target": r["target"]} for r in rows]).map(
        preprocess, batched=True, remove_columns=["source", "target"]) for name, rows in splits.items()}
    arguments = training_arguments(args, Seq2SeqTrainingArguments, predict_with_generate=True)
    trainer = Seq2SeqTrainer(model=model, args=arguments, train_dataset=datasets["train"], eval_dataset=datasets["validation"],
                             data_collator=DataCollatorForSeq2Seq(tokenizer, model=model), processing_class=tokenizer)
    scorer = RougeScorer(["rougeL"], use_stemmer=True)

    def rouge_l(predictions, label_ids):
        # The Trainer pads generations of different lengths with -100 when it gathers them (as run_summarization undoes).
        predictions = numpy.where(predictions != -100, predictions, tokenizer.pad_token_id)
        generated = tokenizer.batch_decode(predictions, skip_special_tokens=True)
        targets = [row["target"] for row in splits["test"]]
        scores = [scorer.score(target, text)["rougeL"].fmeasure for target, text in zip(targets, generated)]
        return {"rougeL": sum(scores) / len(scores)}

    return trainer, datasets["test"], rouge_l


def training_arguments(args, training_arguments_class, **extra):
    return training_arguments_class(output_dir=args.out, num_train_epochs=args.epochs,
                                    per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
                                    report_to="none", **extra)


RECIPES = {"ner": token_classification, "rt": sequence_classification, "headlines": headline_generation}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=sorted(RECIPES))
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--model", required=True)
    parser.add_argument("--epochs", type=float, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--max-length", type=int, required=True)
    args = parser.parse_args()
    started = time.perf_counter()
    trainer, test_set, metric = RECIPES[args.task](args, args.model)
    result = trainer.train()
    trainer.save_model()
    trainer.evaluate()
    prediction = trainer.predict(test_set)
    record = {"training_seconds": result.metrics["train_runtime"], "updates": trainer.state.global_step,
              "after_start_seconds": time.perf_counter() - started, **metric(prediction.predictions, prediction.label_ids)}
    print(json.dumps(record))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
