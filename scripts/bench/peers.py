#!/usr/bin/env python3
"""ipuflow against its peers: the same transformer classifier trained four ways on the CPU.

  raw        a hand-written PyTorch loop (the no-overhead reference)
  hf         transformers.Trainer
  lightning  lightning.Trainer (a LightningModule)
  ipuflow    ipuflow's Trainer built from its config (`Trainer.from_params`, native executor, eager)

Every way trains the same model (a transformers encoder for sequence classification, `--arch`
bert/roberta/distilbert with `--hidden/--layers/--heads/--intermediate`, random init from one seed)
on the same learnable synthetic token data, with AdamW (torch, non-fused), a linear warm-up/decay
schedule, grad-norm clipping at 1.0, batch `--batch-size`, fp32, no loader workers. So that the
four do the *same* training, not just similar training:

* every tool reads the same batches in the same order: one permutation of the data drawn from
  `--seed`, read sequentially (each tool shuffling with its own generator gives each a different
  order, and the final loss of a short run depends more on the order than on anything else);
* the global torch RNG is seeded with `--seed` just before the first step in every tool, so dropout
  draws the same masks;
* every tool uses the same learning rate at every update. The peers use transformers'
  `get_linear_schedule_with_warmup`, whose update k runs at the factor for k-1 (update 1 at lr 0);
  ipuflow's built-in `linear_with_warmup` counts as AllenNLP does (update k at k/warmup; the last
  update at 0), one update ahead. The ipuflow worker registers the peers' count as a schedule
  plugin (`bench_linear_peers_count`); `--ipuflow-schedule builtin` uses the built-in one instead.

With these, ipuflow's per-update losses equal the hand loop's (`max |Δloss|` in the table).

Timing. Each (tool, round) is its own subprocess; rounds run every tool once, in an order rotated
from round to round, so drift and neighbours' load hit every tool alike. Per worker, over the steps
after `--warmup` untimed ones: wall time (perf_counter) and process CPU time (process_time) per
step. Per round, each tool's ratio to the hand loop of the same round (paired ratio); the table
gives the median paired ratio with its spread (min..max over rounds) for both clocks. On a loaded
machine, the CPU-time ratio is the steadier one (time spent waiting for a core is not counted).

Lockstep (`--lockstep`). Alone, a tool's round can run 15% faster or slower than the next one on
this project's VMs, idle or not, which swamps a 1% difference. In lockstep each round is one
process in which every tool trains in its own thread and the tools take turns, one update each
(a baton passed at each update's end), so an update of the hand loop and the same update of a tool
run a fraction of a second apart. CPU time is then read per thread (torch runs with one thread, so
forward, backward and the optimizer all run on the tool's own), and the table adds the per-update
paired ratio (the median over a round's updates of the hand loop's CPU time for update k over the
tool's). Models are built one at a time and without dropout (the tools share the global RNG), so
every tool computes the same numbers; the losses are still compared.

Usage:
  python scripts/bench/peers.py                          # 5 rounds x 4 tools
  python scripts/bench/peers.py --rounds 9 --tools raw,ipuflow,lightning
  python scripts/bench/peers.py --lockstep --rounds 9 --steps 60 --warmup-steps 10 --threads 1
  python scripts/bench/peers.py --arch roberta --hidden 256 --layers 4 --heads 4
  python scripts/bench/peers.py --worker raw             # one worker, prints one JSON line
Lightning, accelerate (for transformers.Trainer) come from scripts/bench/requirements-peers.txt
(a separate virtualenv); a tool whose package is missing is reported and skipped.
"""
import time

T_PROC0 = time.perf_counter()  # as early as possible: before heavy imports

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

TOOLS = ("raw", "hf", "lightning", "ipuflow")
NEEDS = {"raw": ["transformers"], "hf": ["transformers", "accelerate"],
         "lightning": ["transformers", "lightning"], "ipuflow": ["transformers", "ipuflow"]}

# ---------------------------------------------------------------- shared pieces


def make_config(args):
    """The model's transformers config (random init; nothing is downloaded). In lockstep, without
    dropout: the tools share one global RNG there, and with dropout each would draw other masks,
    train other weights and so run other numbers (a few % apart in speed); without it, every tool
    computes the same numbers, update for update."""
    from transformers import BertConfig, DistilBertConfig, RobertaConfig
    if args.arch == "distilbert":
        no_dropout = {"dropout": 0.0, "attention_dropout": 0.0, "seq_classif_dropout": 0.0} if args.lockstep else {}
        return DistilBertConfig(vocab_size=args.vocab, dim=args.hidden, n_layers=args.layers, n_heads=args.heads,
                                hidden_dim=args.intermediate, max_position_embeddings=args.seq_len, num_labels=2,
                                **no_dropout)
    config_class = {"bert": BertConfig, "roberta": RobertaConfig}[args.arch]
    extra = {"max_position_embeddings": args.seq_len + 2, "pad_token_id": 1} if args.arch == "roberta" else {
        "max_position_embeddings": args.seq_len}
    if args.lockstep:
        extra.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return config_class(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=args.intermediate, num_labels=2, **extra)


# In lockstep the tools build their models at once, in threads: one at a time, so that each draws
# its initial weights from the seeded global RNG undisturbed and all start from the same weights;
# and none goes on before all are built (transformers.Trainer reseeds the global RNG when it starts).
_BUILDING = threading.Lock()
_ALL_BUILT = None  # a threading.Barrier in lockstep


def make_model(args):
    import torch
    from transformers import AutoModelForSequenceClassification
    with _BUILDING:
        torch.manual_seed(args.seed)
        model = AutoModelForSequenceClassification.from_config(make_config(args))
    if _ALL_BUILT is not None:
        _ALL_BUILT.wait()
    model.register_forward_pre_hook(_forward_starts)
    return model


# The host work a tool does between two updates: from the end of the optimizer's step to the start
# of the next forward (its loader, zero_grad, scheduler, callbacks, logging, bookkeeping). Every tool
# runs the same model and optimizer, so this is what a tool adds; measured on one thread in a window
# of about a millisecond, it hardly feels the machine's noise. Each tool's thread has its own clock.
_CURRENT = threading.local()


def _forward_starts(module, inputs):
    clock = getattr(_CURRENT, "clock", None)
    if clock is not None:
        clock.forward_starts.append(clock.cpu_clock())


def _step_ends(optimizer, args, kwargs):
    clock = getattr(_CURRENT, "clock", None)
    if clock is not None:
        clock.step_ends.append(clock.cpu_clock())


class SyntheticTokens:
    """Learnable synthetic classification data, generated from a fixed seed.

    Every sequence has random "filler" token ids; for label 1, one to three "trigger" ids (a fixed
    set of 16) are inserted at random positions. Lengths vary from seq_len/2 to seq_len; the rest is
    padding (id 0, mask 0). Item = dict(input_ids, attention_mask, labels), like an HF dataset.
    """

    def __init__(self, n, seq_len, vocab, seed):
        import torch
        g = torch.Generator().manual_seed(seed + 1)
        first_filler = 5 + 16
        ids = torch.randint(first_filler, vocab, (n, seq_len), generator=g)
        labels = torch.randint(0, 2, (n,), generator=g)
        lengths = torch.randint(seq_len // 2, seq_len + 1, (n,), generator=g)
        triggers = torch.arange(5, 5 + 16)
        n_trig = torch.randint(1, 4, (n,), generator=g)
        for i in range(n):
            if labels[i] == 1:
                pos = torch.randint(1, int(lengths[i]), (int(n_trig[i]),), generator=g)
                ids[i, pos] = triggers[torch.randint(0, 16, (int(n_trig[i]),), generator=g)]
        ids[:, 0] = 2  # a CLS-like start token
        mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()
        ids = ids * mask
        self.input_ids, self.attention_mask, self.labels = ids, mask, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.input_ids[i], "attention_mask": self.attention_mask[i],
                "labels": self.labels[i]}


def data_and_order(args):
    """The data set and the one order in which every tool reads it."""
    import torch
    data = SyntheticTokens(args.steps * args.batch_size, args.seq_len, args.vocab, args.seed)
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(args.seed)).tolist()
    return data, order


def torch_loader(args, data, order):
    import torch
    from torch.utils.data import DataLoader
    # Its own generator: iterating a DataLoader draws a seed from it (else from the global RNG).
    return DataLoader(data, batch_size=args.batch_size, sampler=order, num_workers=0,
                      generator=torch.Generator().manual_seed(args.seed))


def peers_schedule(optimizer, args):
    from transformers import get_linear_schedule_with_warmup
    return get_linear_schedule_with_warmup(optimizer, args.warmup_steps, args.steps)


def seed_training(args):
    """Seed the global RNG just before the first step, so every tool's dropout draws alike."""
    import torch
    torch.manual_seed(args.seed)


class StepClock:
    """When each optimizer update starts and ends (wall and CPU time) and its loss.

    Alone in its process, an update starts where the last one ended. In lockstep (`baton` given),
    the tools run in threads of one process and take turns, one update each: an update starts when
    this tool gets the baton and ends at its tick, where the baton goes on; CPU time is then this
    thread's (with one torch thread, forward, backward and the optimizer all run on it).
    """

    def __init__(self, steps, baton=None, turn=0):
        self.steps, self.baton, self.turn = steps, baton, turn
        self.cpu_clock = time.thread_time if baton is not None else time.process_time
        self.starts, self.ends, self.losses = [], [], []
        self.forward_starts, self.step_ends = [], []

    def _now(self):
        return time.perf_counter(), self.cpu_clock()

    def begin(self, args):
        """Before the first update: seed the global RNG (so every tool's dropout draws alike) and,
        in lockstep, wait for every tool to be ready and for this one's turn."""
        seed_training(args)
        if self.baton is not None:
            self.baton.start(self.turn)
        self.starts.append(self._now())

    def tick(self, loss=None):
        """At the end of an update."""
        self.ends.append(self._now())
        if loss is not None:
            self.losses.append(loss.detach())
        done = len(self.ends) == self.steps
        if self.baton is not None:
            self.baton.pass_on(self.turn, leave=done)
            if not done:
                self.baton.wait(self.turn)
        if not done:
            self.starts.append(self.ends[-1] if self.baton is None else self._now())

    def host_gaps(self):
        """CPU ms from the end of update k's optimizer step to the start of update k + 1's forward."""
        return [1000.0 * (start - end) for end, start in zip(self.step_ends, self.forward_starts[1:])]

    def durations(self):
        """(wall ms, CPU ms) of each update."""
        return ([1000.0 * (end[0] - start[0]) for start, end in zip(self.starts, self.ends)],
                [1000.0 * (end[1] - start[1]) for start, end in zip(self.starts, self.ends)])


class Baton:
    """Turns between the tools of a lockstep round: each runs one update, then hands over to the
    next, so consecutive updates of different tools see the same machine (a neighbour's burst or a
    clock change hits both sides of a paired ratio alike)."""

    def __init__(self, count):
        self.condition = threading.Condition()
        self.ready = threading.Barrier(count)
        self.active = list(range(count))
        self.turn = 0

    def start(self, turn):
        self.ready.wait()  # every tool built and at its first update
        self.wait(turn)

    def wait(self, turn):
        with self.condition:
            self.condition.wait_for(lambda: self.turn == turn)

    def pass_on(self, turn, leave=False):
        with self.condition:
            position = self.active.index(turn)
            if leave:
                self.active.remove(turn)
                self.turn = self.active[position % len(self.active)] if self.active else None
            else:
                self.turn = self.active[(position + 1) % len(self.active)]
            self.condition.notify_all()

    def abandon(self, turn):
        """A tool failed: leave the rotation (and release the others from the start barrier)."""
        self.ready.abort()
        if turn in self.active:
            self.pass_on(turn, leave=True)


def summarize(clock, args):
    w = args.warmup
    wall_steps, cpu_steps = clock.durations()
    wall, cpu = sum(wall_steps[w:]), sum(cpu_steps[w:])
    n = len(wall_steps) - w
    per_step = sorted(wall_steps[w:])
    return {
        "steps": len(wall_steps),
        "timed_steps": n,
        "samples_per_s": 1000.0 * n * args.batch_size / wall,
        "ms_per_step": wall / n,
        "cpu_ms_per_step": cpu / n,
        "ms_per_step_p50": per_step[len(per_step) // 2],
        "ms_per_step_p90": per_step[int(len(per_step) * 0.9)],
        # The median update's CPU time: an update slowed by a neighbour (a cache flushed, a core's
        # clock lowered) moves the mean but not the median.
        "cpu_ms_per_step_p50": statistics.median(cpu_steps[w:]),
        "cpu_ms_steps": cpu_steps[w:],
        "host_gap_ms_p50": statistics.median(clock.host_gaps()[w:]),
        # The mean too: work done once every few updates (a loader collating a run of batches)
        # does not show in the median.
        "host_gap_ms_mean": statistics.fmean(clock.host_gaps()[w:]),
    }


# ---------------------------------------------------------------- the four ways


def run_raw(args, rec, clock):
    import torch
    import transformers  # noqa: F401
    rec["import_s"] = time.perf_counter() - T_PROC0
    t = time.perf_counter()
    model = make_model(args)
    data, order = data_and_order(args)
    loader = torch_loader(args, data, order)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, foreach=False, fused=False)
    sched = peers_schedule(opt, args)
    rec["setup_s"] = time.perf_counter() - t

    t_train = time.perf_counter()
    model.train()
    clock.begin(args)
    for batch in loader:
        out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        clock.tick(out.loss)
    rec["train_s"] = time.perf_counter() - t_train


def run_hf(args, rec, clock):
    import tempfile
    import torch
    import transformers
    from transformers import Trainer, TrainerCallback, TrainingArguments
    transformers.logging.set_verbosity_error()
    rec["import_s"] = time.perf_counter() - T_PROC0
    t = time.perf_counter()
    model = make_model(args)
    data, order = data_and_order(args)
    logged = []

    class Clock(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            if state.global_step == 0:  # after the Trainer's loader drew its seed from the global RNG
                clock.begin(args)

        def on_step_end(self, a, state, control, **kw):
            clock.tick(step_losses.pop() if step_losses else None)

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                logged.append(float(logs["loss"]))

    step_losses = []

    class InOrder(Trainer):
        def _get_train_sampler(self, *a, **kw):
            return order

        def training_step(self, *a, **kw):
            loss = super().training_step(*a, **kw)  # detached: what the Trainer accumulates for its logs
            step_losses.append(loss)
            return loss

    outdir = tempfile.mkdtemp(prefix="peers-hf-")
    targs = TrainingArguments(
        output_dir=outdir, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr, weight_decay=0.0,
        optim="adamw_torch",  # the default is adamw_torch_fused; match the hand loop
        lr_scheduler_type="linear", warmup_steps=args.warmup_steps, max_grad_norm=1.0,
        logging_strategy="steps", logging_steps=args.final_window, eval_strategy="no", save_strategy="no",
        report_to="none", dataloader_num_workers=0, dataloader_pin_memory=False, disable_tqdm=True,
        use_cpu=True, seed=args.seed,
    )
    trainer = InOrder(model=model, args=targs, train_dataset=data, callbacks=[Clock()])
    rec["setup_s"] = time.perf_counter() - t
    t_train = time.perf_counter()
    trainer.train()
    rec["train_s"] = time.perf_counter() - t_train
    del torch
    # HF logs the mean loss of each logging window; the last window = the last `final_window` steps
    rec["hf_final_loss"] = logged[-1] if logged else None


def run_lightning(args, rec, clock):
    import logging
    import warnings
    import torch
    import lightning as L
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    rec["import_s"] = time.perf_counter() - T_PROC0
    t = time.perf_counter()

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = make_model(args)

        def training_step(self, batch, batch_idx):
            loss = self.model(**batch).loss
            self.log("train_loss", loss)  # what a typical LightningModule does
            return loss

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=args.lr, weight_decay=0.0)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": peers_schedule(opt, args), "interval": "step"}}

    class Clock(L.Callback):
        def on_train_start(self, trainer, pl_module):
            clock.begin(args)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            clock.tick(outputs["loss"])

    module = Module()
    data, order = data_and_order(args)
    loader = torch_loader(args, data, order)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=args.steps, precision="32-true",
        gradient_clip_val=1.0, gradient_clip_algorithm="norm", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=args.final_window,
        num_sanity_val_steps=0, limit_val_batches=0, callbacks=[Clock()],
    )
    rec["setup_s"] = time.perf_counter() - t
    t_train = time.perf_counter()
    trainer.fit(module, train_dataloaders=loader)
    rec["train_s"] = time.perf_counter() - t_train


def run_ipuflow(args, rec, clock):
    """ipuflow's Trainer through its config resolver, as `ipuflow train` builds it: native executor
    (eager, CPU), AdamW, clipping at 1.0 in the executor; default callbacks (progress bar,
    TensorBoard) off and no checkpoints, like the HF and Lightning runs."""
    import tempfile
    import transformers  # noqa: F401
    from ipuflow.config import Params
    from ipuflow.data.loader import FixedShapeDataLoader
    from ipuflow.models import Model
    from ipuflow.training import Trainer
    from ipuflow.training.callbacks import TrainerCallback
    from ipuflow.training.optim.lr_schedulers import LearningRateScheduler
    from ipuflow.training.optim.lr_schedulers.update_schedules import UpdateFactorScheduler
    import ipuflow.execution.native  # noqa: F401
    rec["import_s"] = time.perf_counter() - T_PROC0
    t = time.perf_counter()

    @TrainerCallback.register("bench_clock", exist_ok=True)
    class Clock(TrainerCallback):
        def on_train_begin(self, event):
            clock.begin(args)

        def on_step_end(self, event):
            clock.tick(event.outputs["loss"])  # one update per host call: this update's loss

    @LearningRateScheduler.register("bench_linear_peers_count", exist_ok=True)
    class LinearPeersCount(UpdateFactorScheduler):
        """transformers' linear warm-up/decay count: update k runs at the factor for k - 1."""

        def __init__(self, optimizer, warmup_steps: int, num_training_steps: int, last_epoch: int = -1):
            super().__init__(optimizer, last_epoch)
            self.warmup_steps, self.num_training_steps = warmup_steps, num_training_steps
            self.step_batch(1)

        def factor(self, update_number):
            step = update_number - 1
            if step < self.warmup_steps:
                return step / max(1, self.warmup_steps)
            return max(0.0, (self.num_training_steps - step) / max(1, self.num_training_steps - self.warmup_steps))

    class Wrapped(Model):
        def __init__(self):
            super().__init__()
            self.encoder = make_model(args)

        def forward(self, tokens, tokens_mask, label):
            out = self.encoder(input_ids=tokens, attention_mask=tokens_mask.long(), labels=label)
            return {"loss": out.loss, "logits": out.logits}

    model = Wrapped()
    data, order = data_and_order(args)
    lengths = data.attention_mask.sum(1).tolist()
    instances = [{"tokens": data.input_ids[i, :lengths[i]].tolist(), "label": int(data.labels[i])} for i in order]
    # Fixed shapes, as the other tools are fed on the lockstep path (the eager default pads per batch).
    loader = FixedShapeDataLoader(instances, batch_size=args.batch_size, max_length=args.seq_len, shuffle=False,
                                  padding="fixed")
    if args.ipuflow_schedule == "builtin":
        schedule = {"type": "linear_with_warmup", "warmup_steps": args.warmup_steps}
    else:
        schedule = {"type": "bench_linear_peers_count", "warmup_steps": args.warmup_steps,
                    "num_training_steps": args.steps}
    trainer = Trainer.from_params(
        Params({
            "num_epochs": 1,
            # torch's single-tensor AdamW, as the hand loop's (ipuflow's default would be fused).
            "optimizer": {"type": "adamw", "lr": args.lr, "weight_decay": 0.0, "fused": False, "foreach": False},
            "learning_rate_scheduler": schedule,
            "executor": {"type": "native", "device": "cpu", "max_grad_norm": 1.0},
            "callbacks": [{"type": "bench_clock"}],
            "checkpointer": None,
            "enable_default_callbacks": False,
            "log_interval": args.final_window,
        }),
        model=model,
        serialization_dir=tempfile.mkdtemp(prefix="peers-ipuflow-"),
        data_loader=loader,
    )
    rec["setup_s"] = time.perf_counter() - t
    t_train = time.perf_counter()
    trainer.train()
    rec["train_s"] = time.perf_counter() - t_train


RUNS = {"raw": run_raw, "hf": run_hf, "lightning": run_lightning, "ipuflow": run_ipuflow}


def finish(tool, rec, clock, args):
    """The worker's record for `tool`, printed as one RESULT line."""
    if len(clock.ends) != args.steps:
        raise SystemExit(f"{tool}: ran {len(clock.ends)} steps, expected {args.steps}")
    rec.update(summarize(clock, args))
    losses = [float(loss) for loss in clock.losses]
    rec["losses"] = losses
    window = losses[-args.final_window:]
    rec["final_loss"] = sum(window) / len(window) if window else rec.get("hf_final_loss")
    rec["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    rec["in_process_s"] = time.perf_counter() - T_PROC0
    print("RESULT " + json.dumps(rec), flush=True)


def worker(args):
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    rec = {"tool": args.worker, "torch_threads": torch.get_num_threads()}
    clock = StepClock(args.steps)
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(_step_ends)
    _CURRENT.clock = clock
    RUNS[args.worker](args, rec, clock)
    finish(args.worker, rec, clock, args)


def lockstep_worker(args):
    """Every tool of `--lockstep-worker` in a thread of this process, taking turns update by update."""
    import torch
    torch.set_num_threads(1)  # CPU time is read per thread: torch's work must run on the tool's own
    global _ALL_BUILT
    tools = args.lockstep_worker.split(",")
    baton = Baton(len(tools))
    _ALL_BUILT = threading.Barrier(len(tools))
    records = {tool: {"tool": tool, "torch_threads": 1} for tool in tools}
    clocks = {tool: StepClock(args.steps, baton, turn) for turn, tool in enumerate(tools)}
    failures = {}
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(_step_ends)

    def run(turn, tool):
        _CURRENT.clock = clocks[tool]
        try:
            RUNS[tool](args, records[tool], clocks[tool])
        except BaseException as error:  # noqa: BLE001 - reported below; the other tools go on
            failures[tool] = repr(error)
            _ALL_BUILT.abort()
            baton.abandon(turn)

    threads = [threading.Thread(target=run, args=(turn, tool), name=tool) for turn, tool in enumerate(tools)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"lockstep tools failed: {failures}")
    for tool in tools:
        finish(tool, records[tool], clocks[tool], args)


# ---------------------------------------------------------------- parent


def versions():
    import importlib.metadata as md
    v = {"python": sys.version.split()[0]}
    for p in ("torch", "transformers", "accelerate", "lightning", "numpy"):
        try:
            v[p] = md.version(p)
        except md.PackageNotFoundError:
            v[p] = None
    return v


def available(tool):
    missing = [m for m in NEEDS[tool] if importlib.util.find_spec(m) is None]
    if missing:
        print(f"skipping {tool}: {', '.join(missing)} not installed", file=sys.stderr)
    return not missing


def spread(values, signed=False):
    form = "+.3f" if signed else ".3f"
    return f"{statistics.median(values):{form}} ({min(values):{form}}..{max(values):{form}})"


def parent(args):
    tools = [t for t in args.tools.split(",") if t and available(t)]
    if "raw" not in tools:
        raise SystemExit("the hand loop (raw) is the reference: include it in --tools")
    results = {t: [] for t in tools}
    forwarded = ["--steps", "--batch-size", "--seq-len", "--vocab", "--lr", "--seed", "--warmup",
                 "--warmup-steps", "--final-window", "--threads", "--arch", "--hidden", "--layers", "--heads",
                 "--intermediate", "--ipuflow-schedule"]
    base = [sys.executable, os.path.abspath(__file__)]
    for flag in forwarded:
        base += [flag, str(getattr(args, flag[2:].replace("-", "_")))]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's ipuflow
    for r in range(args.rounds):
        rotated = tools[r % len(tools):] + tools[:r % len(tools)]  # so no tool always runs right after another
        # Alone: one process per tool, one after another. Lockstep: one process, the tools taking turns.
        runs = [["--lockstep-worker", ",".join(rotated)]] if args.lockstep else [["--worker", t] for t in rotated]
        for run in runs:
            t0 = time.perf_counter()
            p = subprocess.run(base + run, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode != 0 or not lines:
                sys.stderr.write(p.stdout[-3000:] + p.stderr[-6000:])
                raise SystemExit(f"worker {run[1]} failed (rc={p.returncode})")
            for line in lines:
                rec = json.loads(line[len("RESULT "):])
                rec["wall_s"] = wall
                rec["round"] = r + 1
                results[rec["tool"]].append(rec)
                print(f"round {r + 1} {rec['tool']:9s} {rec['samples_per_s']:7.1f} samples/s  "
                      f"{rec['ms_per_step']:6.1f} ms/step  cpu {rec['cpu_ms_per_step']:6.1f} ms/step  "
                      f"loss {rec['final_loss']:.5f}  wall {wall:5.1f}s", flush=True)

    raw = results["raw"]
    table = {}
    for tool, recs in results.items():
        row = {k: statistics.median(r[k] for r in recs)
               for k in ("samples_per_s", "ms_per_step", "cpu_ms_per_step", "final_loss", "peak_rss_mib", "import_s",
                         "setup_s", "wall_s", "host_gap_ms_p50", "host_gap_ms_mean", "cpu_ms_per_step_p50")}
        # Host work between updates over the hand loop's in the same round (median, then mean, per round).
        row["host_gap_over_raw_p50"] = [r["host_gap_ms_p50"] - r0["host_gap_ms_p50"] for r0, r in zip(raw, recs)]
        row["host_gap_over_raw_mean"] = [r["host_gap_ms_mean"] - r0["host_gap_ms_mean"] for r0, r in zip(raw, recs)]
        row["speed_ratios"] = [r0["ms_per_step"] / r["ms_per_step"] for r0, r in zip(raw, recs)]
        row["cpu_ratios"] = [r0["cpu_ms_per_step"] / r["cpu_ms_per_step"] for r0, r in zip(raw, recs)]
        row["cpu_median_ratios"] = [r0["cpu_ms_per_step_p50"] / r["cpu_ms_per_step_p50"] for r0, r in zip(raw, recs)]
        # Per update: the hand loop's CPU time over the tool's for the same update number (in
        # lockstep, run one right after the other); per round, the median over the timed updates.
        row["update_ratios"] = [statistics.median(a / b for a, b in zip(r0["cpu_ms_steps"], r["cpu_ms_steps"]))
                                for r0, r in zip(raw, recs)]
        if recs[0]["losses"] and raw[0]["losses"]:
            row["max_loss_diff"] = max(abs(a - b) for a, b in zip(recs[0]["losses"], raw[0]["losses"]))
        table[tool] = row
    first = results["raw"][0]
    print(f"\n{args.rounds} rounds; {args.arch} hidden {args.hidden} x {args.layers} layers, {args.steps} updates x batch "
          f"{args.batch_size} (seq {args.seq_len}), timed updates {args.warmup + 1}..{args.steps}; "
          f"torch {versions()['torch']}, {first['torch_threads']} threads")
    print("lockstep: the tools took turns, one update each, in one process (CPU time per thread), without dropout\n"
          if args.lockstep else "", end="")
    print("speed = hand loop's time per update / the tool's, paired per round: median (min..max) over rounds; "
          "per update: the median over a round's updates of the paired per-update ratio")
    hdr = ("tool", "samples/s", "speed vs hand loop (wall)", "speed vs hand loop (CPU time)",
           "speed vs hand loop (median update's CPU time)", "speed vs hand loop (per update, CPU)", "CPU ms/update",
           "host work between updates, CPU ms: median, mean (share of the median update)",
           "host work over the hand loop's, CPU ms: median, mean",
           f"final loss (last {args.final_window})", "max |Δloss| per update", "peak RSS MiB", "import s")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for tool in tools:
        m = table[tool]
        diff = f"{m['max_loss_diff']:.1e}" if "max_loss_diff" in m else "-"
        print(f"| {tool} | {m['samples_per_s']:.1f} | {spread(m['speed_ratios'])} | {spread(m['cpu_ratios'])} | "
              f"{spread(m['cpu_median_ratios'])} | {spread(m['update_ratios'])} | "
              f"{m['cpu_ms_per_step']:.1f} | {m['host_gap_ms_p50']:.3f}, {m['host_gap_ms_mean']:.3f} "
              f"({100 * m['host_gap_ms_mean'] / m['cpu_ms_per_step_p50']:.2f}%) | "
              f"{spread(m['host_gap_over_raw_p50'], signed=True)}, {spread(m['host_gap_over_raw_mean'], signed=True)} | "
              f"{m['final_loss']:.5f} | {diff} | {m['peak_rss_mib']:.0f} | "
              f"{m['import_s']:.2f} |")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"args": vars(args), "versions": versions(), "table": table, "runs": results}, fh, indent=1)
        print(f"\nwrote {args.json_out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=TOOLS)
    ap.add_argument("--lockstep-worker", help=argparse.SUPPRESS)
    ap.add_argument("--lockstep", action="store_true",
                    help="run each round's tools in one process, taking turns update by update (one torch thread)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--arch", choices=("bert", "roberta", "distilbert"), default="bert")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps at the start")
    ap.add_argument("--warmup-steps", type=int, default=20, help="LR schedule warm-up updates")
    ap.add_argument("--final-window", type=int, default=50, help="final loss = mean over this many last updates")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 = torch default")
    ap.add_argument("--ipuflow-schedule", choices=("peers", "builtin"), default="peers",
                    help="ipuflow's lr count: the peers' (default) or its built-in linear_with_warmup")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if args.lockstep and args.threads not in (0, 1):
        raise SystemExit("--lockstep reads CPU time per thread: it runs torch with one thread (--threads 1)")
    if args.lockstep_worker:
        args.lockstep = True
        lockstep_worker(args)
    elif args.worker:
        worker(args)
    else:
        parent(args)


if __name__ == "__main__":
    main()
