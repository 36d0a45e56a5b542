"""Save a checkpoint's variables laid out as a DeepSpeech 0.9 / Coqui STT release checkpoint (trained with
cuDNN): without the LSTM's Adam moments and our epoch_position and epoch_loss (and the variables a layout
names after its `=`), with cuDNN's flat opaque moments, as best_dev-<global_step> in OUT_DIR, and a
best_dev_checkpoint naming it by the absolute path of the machine it was trained on. Several layouts of one
source in one process (one TensorFlow import):

    python write_release_layout.py SOURCE_CHECKPOINT_PREFIX OUT_DIR[=NAME,NAME...] ...

A process of its own (tests/test_release_checkpoints.py runs it): the TF1 Session it needs is never
opened inside the pytest process (stop 29's CI hung silently in that file's first test, where one was)."""
import argparse
import os

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

LSTM = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell/'
LSTM_MOMENTS = [LSTM + variable + slot for variable in ('kernel', 'bias') for slot in ('/Adam', '/Adam_1')]
OPAQUE_MOMENTS = ['cudnn_lstm/opaque_kernel/Adam', 'cudnn_lstm/opaque_kernel/Adam_1']


def release_values(values, leave_out=()):
    left_out = LSTM_MOMENTS + ['epoch_position', 'epoch_loss'] + list(leave_out)
    release = {name: value for name, value in values.items() if name not in left_out}
    kernel, bias = values[LSTM + 'kernel'], values[LSTM + 'bias']
    for name in OPAQUE_MOMENTS:
        release[name] = np.full(kernel.size + 2 * bias.size, 1e-4, np.float32)    # cuDNN has two bias sets
    return release


def write_layout(values, out_dir, leave_out):
    release = release_values(values, leave_out)
    name = 'best_dev-{}'.format(values['global_step'])
    os.makedirs(out_dir, exist_ok=True)
    with tf.Graph().as_default():
        saver = tfv1.train.Saver({n: tfv1.Variable(value, name='v{}'.format(i))
                                  for i, (n, value) in enumerate(release.items())})
        with tfv1.Session() as session:
            session.run(tfv1.global_variables_initializer())
            saver.save(session, os.path.join(out_dir, name), write_meta_graph=False, write_state=False)
    with open(os.path.join(out_dir, 'best_dev_checkpoint'), 'w') as state:
        state.write('model_checkpoint_path: "/mnt/train/{0}"\nall_model_checkpoint_paths: "/mnt/train/{0}"\n'
                    .format(name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('source', help='the checkpoint (prefix) whose variables to lay out')
    parser.add_argument('layouts', nargs='+', metavar='OUT_DIR[=NAME,NAME...]',
                        help='a folder to write, and the variables to leave out of it as well')
    args = parser.parse_args()
    reader = tf.train.load_checkpoint(args.source)
    values = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    for layout in args.layouts:
        out_dir, _, leave_out = layout.partition('=')
        write_layout(values, out_dir, [name for name in leave_out.split(',') if name])


if __name__ == '__main__':
    main()
