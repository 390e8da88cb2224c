// A SEARCH file for `ipuflow tune` over the quickstart: learning rate and dropout.
//   ipuflow tune configs/quickstart.jsonnet configs/quickstart_search.jsonnet -s runs/quickstart-search \
//     -o '{"trainer.num_epochs": 4, "evaluate_on_test": false}'
{
  parameters: {
    "trainer.optimizer.lr": { type: "float", low: 1e-3, high: 3e-2, log: true },
    "model.dropout": { type: "float", low: 0.0, high: 0.7 },
  },
  n_trials: 12,
  sampler: { type: "tpe", seed: 0, n_startup_trials: 5 },
  pruner: { type: "median", n_startup_trials: 4, n_warmup_steps: 1 },
}
