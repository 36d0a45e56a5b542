"""The names of DeepSpeech 0.9's checkpoint folder (its files) and of the loop's variables in a checkpoint,
kept once for those who write and read them (checkpoints.py, ema.py, checkpoint_averaging.py, train_graph.py,
trainer.py): a checkpoint folder of DeepSpeech 0.9 loads here and one of ours loads there."""

TRAIN = 'train'                         # train-<step>: the last --max_to_keep
BEST_DEV = 'best_dev'                   # best_dev-<step>: the lowest dev loss so far
TRAIN_STATE = 'checkpoint'              # the state file naming the train checkpoints (TensorFlow's default)
BEST_STATE = 'best_dev_checkpoint'      # the state file naming the best_dev checkpoint
BEST_LOSS_FILE = 'best_dev_loss.json'   # the best_dev checkpoint's dev loss (ours; DeepSpeech 0.9 has none)
FLAGS_FILE = 'flags.txt'                # the flags of the run that wrote the folder
EMA_FOLDER = 'ema'                      # --ema_decay's weight average, a checkpoint folder of its own (ema.py)

GLOBAL_STEP = 'global_step'
LEARNING_RATE = 'learning_rate'         # unscaled: it means the same whatever the number of ranks
EPOCH_POSITION = 'epoch_position'       # the trainer's [epoch, batches done, batches planned]
EPOCH_LOSS = 'epoch_loss'               # [loss sum, sample count] of the batches done, over all ranks
