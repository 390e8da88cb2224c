"""How the weights move: optimizers (with LAMB), regularization, moving averages, and the
learning-rate and momentum schedulers."""
