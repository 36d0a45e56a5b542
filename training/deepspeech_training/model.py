"""The DeepSpeech network: context windows in, logits out, with DeepSpeech 0.9's variable names.

layer_1..3: dense + clipped ReLU; layer 4: LSTM (the fused BlockLSTM op, variables named as
DeepSpeech's cuDNN-compatible cell, gate order i, c, f, o, forget bias 0); layer_5: dense + clipped
ReLU; layer_6: dense to alphabet size + 1 (the CTC blank is the last class).
"""
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

LSTM_SCOPE = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell'
# Transfer learning drops layers from the output side: drop_source_layers=k re-initialises these.
LAYERS_FROM_OUTPUT = ['layer_6', 'layer_5', 'cudnn_lstm', 'layer_3', 'layer_2', 'layer_1']


def dense(name, x, units, dropout_rate=None, relu=True, relu_clip=20.0):
    with tfv1.variable_scope(name):
        bias = tfv1.get_variable('bias', [units], initializer=tfv1.zeros_initializer())
        weights = tfv1.get_variable('weights', [x.shape[-1], units],
                                    initializer=tfv1.keras.initializers.VarianceScaling(
                                        scale=1.0, mode='fan_avg', distribution='uniform'))
    output = tf.nn.bias_add(tf.matmul(x, weights), bias)
    if relu:
        output = tf.minimum(tf.nn.relu(output), relu_clip)
    if dropout_rate is not None:
        output = tf.nn.dropout(output, rate=dropout_rate)
    return output


def fused_lstm(x, seq_length, n_cell, initial_state=None):
    """Time-major x [T, B, n] -> outputs [T, B, n_cell] and final (c, h), via the BlockLSTM op."""
    batch = tf.shape(x)[1]
    with tfv1.variable_scope(LSTM_SCOPE):
        kernel = tfv1.get_variable('kernel', [x.shape[-1] + n_cell, 4 * n_cell])
        bias = tfv1.get_variable('bias', [4 * n_cell], initializer=tfv1.zeros_initializer())
    if initial_state is None:
        zeros = tf.zeros([batch, n_cell], x.dtype)
        initial_state = (zeros, zeros)
    no_peephole = tf.zeros([n_cell], x.dtype)
    _, cs, _, _, _, _, h = tf.raw_ops.BlockLSTM(
        seq_len_max=tf.cast(tf.reduce_max(seq_length), tf.int64), x=x, cs_prev=initial_state[0],
        h_prev=initial_state[1], w=kernel, wci=no_peephole, wcf=no_peephole, wco=no_peephole, b=bias,
        forget_bias=0.0, cell_clip=-1.0, use_peephole=False)
    last = tf.stack([tf.maximum(seq_length - 1, 0), tf.range(batch)], axis=1)
    return h, (tf.gather_nd(cs, last), tf.gather_nd(h, last))


def create_model(windows, seq_length, config, dropout_rates, relu_clip=20.0, initial_state=None):
    """windows [B, T, 2*n_context+1, n_input] -> time-major logits [T, B, n_classes] and LSTM state.

    dropout_rates: six scalars (tensors), for layers 1, 2, 3, 4 (LSTM output), 5 and, as in
    DeepSpeech 0.9, the input of layer 6 (applied after layer 5's own rate)."""
    batch = tf.shape(windows)[0]
    time_major = tf.transpose(windows, [1, 0, 2, 3])
    x = tf.reshape(time_major, [-1, config.window_width * config.n_input])
    layer_1 = dense('layer_1', x, config.n_hidden, dropout_rates[0], relu_clip=relu_clip)
    layer_2 = dense('layer_2', layer_1, config.n_hidden, dropout_rates[1], relu_clip=relu_clip)
    layer_3 = dense('layer_3', layer_2, config.n_hidden, dropout_rates[2], relu_clip=relu_clip)
    rnn_input = tf.reshape(layer_3, [-1, batch, config.n_hidden])
    rnn_output, state = fused_lstm(rnn_input, seq_length, config.n_hidden, initial_state)
    rnn_output = tf.nn.dropout(tf.reshape(rnn_output, [-1, config.n_hidden]), rate=dropout_rates[3])
    layer_5 = dense('layer_5', rnn_output, config.n_hidden, dropout_rates[4], relu_clip=relu_clip)
    layer_5 = tf.nn.dropout(layer_5, rate=dropout_rates[5])
    layer_6 = dense('layer_6', layer_5, config.n_classes, relu=False)
    return tf.reshape(layer_6, [-1, batch, config.n_classes], name='raw_logits'), state


def dropout_placeholders():
    """Six rates that default to 0 (evaluation); training feeds the flag values."""
    return [tfv1.placeholder_with_default(0.0, [], name='dropout_{}'.format(i)) for i in range(6)]


def ctc_loss(logits, seq_length, labels, label_lengths):
    """Per-sample CTC loss; labels [B, L] padded, turned into the sparse form the fast CPU op takes."""
    mask = tf.sequence_mask(label_lengths, tf.shape(labels)[1])
    indices = tf.where(mask)
    sparse = tf.SparseTensor(indices, tf.gather_nd(labels, indices), tf.cast(tf.shape(labels), tf.int64))
    return tfv1.nn.ctc_loss(labels=sparse, inputs=logits, sequence_length=seq_length,
                            ignore_longer_outputs_than_inputs=True)
