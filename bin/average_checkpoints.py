#!/usr/bin/env python3
"""Write the mean of a run's last K checkpoints as one checkpoint that test, export and transcription load
(doc/QUALITY.rst, "Averaged checkpoints"):

    python bin/average_checkpoints.py --checkpoint_dir my/checkpoints --last 5 --out_dir my/averaged
    python DeepSpeech.py --n_hidden 2048 --checkpoint_dir my/averaged --test_files my/test.csv

The model's weights are averaged; Adam's moments, global_step, the learning rate and the epoch position
are the newest checkpoint's. The output is `best_dev-<step>` with both state files naming it (so
--load_evaluate best, last and auto find it) and the run's flags.txt. The code is the checkout's
training/deepspeech_training/checkpoint_averaging.py."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'training'))
from deepspeech_training.checkpoint_names import BEST_DEV, TRAIN  # noqa: E402 (no TensorFlow: --help stays quick)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--checkpoint_dir', required=True, help='the run\'s checkpoint folder')
    parser.add_argument('--kind', choices=(TRAIN, BEST_DEV), default=TRAIN,
                        help='which checkpoints: train-* (the last --max_to_keep of a run) or best_dev-*')
    parser.add_argument('--last', type=int, required=True, help='how many of the newest to average (K >= 1)')
    parser.add_argument('--out_dir', required=True, help='where the averaged checkpoint goes (not --checkpoint_dir)')
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error('--last must be 1 or more')
    from deepspeech_training.entry import quiet_tensorflow
    quiet_tensorflow('2')
    import tensorflow as tf
    tf.get_logger().setLevel('ERROR')   # update_checkpoint_state's deprecation notice
    from deepspeech_training.checkpoint_averaging import AveragingError, average_checkpoints
    try:
        prefix, inputs = average_checkpoints(args.checkpoint_dir, args.out_dir, args.last, args.kind)
    except AveragingError as error:
        sys.exit('average_checkpoints: {}'.format(error))
    print('Wrote {}: the mean of {}'.format(prefix, ', '.join(os.path.basename(p) for p in inputs)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
