"""Hyperparameter search over config keys (`ipuflow tune`), with optuna.

optuna is imported only inside the functions that run a search, so importing this package (and
`ipuflow --help`) stays fast.
"""
