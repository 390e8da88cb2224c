"""The training loop: the `Trainer` base, `GradientDescentTrainer`, its construction, validation,
schedule stepping and training metrics."""
