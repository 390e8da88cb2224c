"""What a checkpoint holds and how it is written and read: the checkpointer, the trainer's
checkpoints, the training state's stateful parts and the best weights."""
