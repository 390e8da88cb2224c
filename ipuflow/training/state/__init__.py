"""Where training stands: the `TrainerState`, the run status, interruptions, the metric tracker,
the running loss, RNG state and the epoch's metrics."""
