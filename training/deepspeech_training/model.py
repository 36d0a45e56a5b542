"""The DeepSpeech network: context windows in, logits out, with DeepSpeech 0.9's variable names.

layer_1..3: dense + clipped ReLU; layer 4: LSTM (the fused BlockLSTM op or its equivalents, variables named as
DeepSpeech's cuDNN-compatible cell, gate order i, c, f, o, forget bias 0); layer_5: dense + clipped
ReLU; layer_6: dense to alphabet size + 1 (the CTC blank is the last class). With --layer_norm, layers 1-3
and 5 are layer-normalised after the ReLU, as in DeepSpeech 0.9.
"""
import functools

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

LSTM_SCOPE = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell'
# Transfer learning drops layers from the output side: drop_source_layers=k re-initialises these.
LAYERS_FROM_OUTPUT = ['layer_6', 'layer_5', 'cudnn_lstm', 'layer_3', 'layer_2', 'layer_1']
LAYER_NORM_SCOPE = 'LayerNorm'   # inside a layer's scope, as tf.contrib.layers.layer_norm named it


def layer_norm(x):
    """tf.contrib.layers.layer_norm as DeepSpeech 0.9 called it (tf.contrib is gone from TensorFlow 2):
    normalise each row over its features, then scale by `gamma` and shift by `beta`, variables
    <layer>/LayerNorm/beta and /gamma, epsilon 1e-12."""
    with tfv1.variable_scope(LAYER_NORM_SCOPE):
        beta = tfv1.get_variable('beta', x.shape[-1:], initializer=tfv1.zeros_initializer())
        gamma = tfv1.get_variable('gamma', x.shape[-1:], initializer=tfv1.ones_initializer())
    mean, variance = tf.nn.moments(x, [1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)


def dense(name, x, units, dropout_rate=None, relu=True, relu_clip=20.0, normalise=False):
    with tfv1.variable_scope(name):
        bias = tfv1.get_variable('bias', [units], initializer=tfv1.zeros_initializer())
        weights = tfv1.get_variable('weights', [x.shape[-1], units],
                                    initializer=tfv1.keras.initializers.VarianceScaling(
                                        scale=1.0, mode='fan_avg', distribution='uniform'))
    output = tf.nn.bias_add(tf.matmul(x, weights), bias)
    if relu:
        output = tf.minimum(tf.nn.relu(output), relu_clip)
    if normalise:
        with tfv1.variable_scope(name):
            output = layer_norm(output)
    if dropout_rate is not None:
        output = tf.nn.dropout(output, rate=dropout_rate)
    return output


def lstm_variables(n_input, n_cell):
    """The LSTM's kernel [n_input + n_cell, 4 n_cell] and bias, under DeepSpeech's cuDNN-compatible names."""
    with tfv1.variable_scope(LSTM_SCOPE):
        kernel = tfv1.get_variable('kernel', [n_input + n_cell, 4 * n_cell])
        bias = tfv1.get_variable('bias', [4 * n_cell], initializer=tfv1.zeros_initializer())
    return kernel, bias


def size(x, axis):
    """x's size along axis: a number where the shape is static (exported graphs, so that the released
    DeepSpeech client, whose runtime lacks StridedSlice, need not slice a shape), else a tensor."""
    return tf.compat.dimension_value(x.shape[axis]) or tf.shape(x)[axis]


def zero_state(x, n_cell):
    zeros = tf.zeros([size(x, 1), n_cell], x.dtype)
    return zeros, zeros


def final_state(initial, states, seq_length):
    """Each sequence's state after its seq_length steps (the initial state for length 0), picked from
    states [T, B, n] as DeepSpeech's LSTMBlockFusedCell does, in ops the 0.9 client runs."""
    with_initial = tf.concat([tf.expand_dims(initial, 0), states], 0)
    return tf.gather_nd(with_initial, tf.stack([seq_length, tf.range(size(states, 1))], axis=1))


def fused_lstm(x, seq_length, n_cell, initial_state=None):
    """Time-major x [T, B, n] -> outputs [T, B, n_cell] and final (c, h), via the BlockLSTM op."""
    kernel, bias = lstm_variables(x.shape[-1], n_cell)
    c_prev, h_prev = initial_state or zero_state(x, n_cell)
    no_peephole = tf.zeros([n_cell], x.dtype)
    _, cs, _, _, _, _, h = tf.raw_ops.BlockLSTM(
        seq_len_max=tf.cast(tf.reduce_max(seq_length), tf.int64), x=x, cs_prev=c_prev, h_prev=h_prev, w=kernel,
        wci=no_peephole, wcf=no_peephole, wco=no_peephole, b=bias, forget_bias=0.0, cell_clip=-1.0,
        use_peephole=False)
    return h, (final_state(c_prev, cs, seq_length), final_state(h_prev, h, seq_length))


def unrolled_lstm(x, seq_length, n_cell, initial_state=None):
    """The same cell unrolled over a static number of steps in plain matmuls, for TF Lite (which has
    no BlockLSTM); steps beyond a sequence's length keep its state. Without seq_length every step
    runs, as in DeepSpeech's TF Lite graph, which the clients feed no lengths."""
    kernel, bias = lstm_variables(x.shape[-1], n_cell)
    c, h = initial_state or zero_state(x, n_cell)
    outputs = []
    for t in range(x.shape[0]):
        gates = tf.matmul(tf.concat([x[t], h], axis=1), kernel) + bias
        i, candidate, f, o = tf.split(gates, 4, axis=1)   # BlockLSTM's gate order, forget bias 0
        new_c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(candidate)
        new_h = tf.sigmoid(o) * tf.tanh(new_c)
        if seq_length is None:
            c, h = new_c, new_h
        else:
            running = tf.expand_dims(t < seq_length, 1)
            c, h = tf.where(running, new_c, c), tf.where(running, new_h, h)
        outputs.append(new_h)
    return tf.stack(outputs), (c, h)


def matmul(a, b, dtype=None, **options):
    """a.b, with a and b cast to `dtype` first when given, the result in a's type."""
    if dtype is None:
        return tf.matmul(a, b, **options)
    return tf.cast(tf.matmul(tf.cast(a, dtype), tf.cast(b, dtype), **options), a.dtype)


def scan_lstm(x, seq_length, n_cell, initial_state=None, product_dtype=None):
    """fused_lstm's cell, variables and results (outputs, and zeros after max(seq_length) steps, as
    BlockLSTM) as a graph-mode loop that is fast on CPU, forward and backward.

    Forward: x.W_x + b for all steps in one matmul, then one [B, n_cell] x [n_cell, 4 n_cell] matmul
    per step. Backward (hand-written, tf.custom_gradient): a reverse loop computing only the gate
    gradients and their product with W_h^T per step; dx, dW_x, dW_h and db are then one big matmul
    each (autodiff of the loop would add a [n_cell, 4 n_cell] product into dW_h at every step).

    product_dtype (--automatic_mixed_precision's 16-bit type): the matmuls take it, everything else stays
    float32. Left to the bfloat16 graph rewrite, the loops' state (cell state, the gradients carried back)
    became bfloat16 too and its rounding compounded over the time steps (doc/PERFORMANCE.rst); the
    rewrite leaves these explicit casts alone."""
    n_input = int(x.shape[-1])
    batch = tf.shape(x)[1]
    kernel, bias = lstm_variables(n_input, n_cell)
    c_prev, h_prev = initial_state or zero_state(x, n_cell)
    steps = tf.minimum(tf.cast(tf.reduce_max(seq_length), tf.int32), tf.shape(x)[0])
    pad_to_time = [[0, tf.shape(x)[0] - steps], [0, 0], [0, 0]]

    def array(width):
        return tf.TensorArray(x.dtype, size=steps, element_shape=tf.TensorShape([None, width]))

    @tf.custom_gradient
    def lstm(x, cs_0, h_0, kernel, bias):
        w_x, w_h = kernel[:n_input], kernel[n_input:]
        w_h_product = tf.cast(w_h, product_dtype or w_h.dtype)   # once, not at every step
        inputs = tf.reshape(x[:steps], [-1, n_input])
        xw = tf.reshape(tf.nn.bias_add(matmul(inputs, w_x, product_dtype), bias), [steps, batch, 4 * n_cell])

        def step(t, cs_prev, h_prev, gates_out, cs_out, h_out):
            i, ci, f, o = tf.split(xw[t] + matmul(h_prev, w_h_product, product_dtype), 4, 1)   # BlockLSTM's order
            i, ci, f, o = tf.sigmoid(i), tf.tanh(ci), tf.sigmoid(f), tf.sigmoid(o)   # forget bias 0
            cs = f * cs_prev + i * ci
            h = o * tf.tanh(cs)
            cs.set_shape(cs_prev.shape)
            h.set_shape(h_prev.shape)
            return (t + 1, cs, h, gates_out.write(t, tf.concat([i, ci, f, o], 1)), cs_out.write(t, cs),
                    h_out.write(t, h))

        _, _, _, gates_out, cs_out, h_out = tf.while_loop(
            lambda t, *_: t < steps, step, [0, cs_0, h_0, array(4 * n_cell), array(n_cell), array(n_cell)],
            parallel_iterations=2, swap_memory=False)
        cs_seq, h_seq = cs_out.stack(), h_out.stack()

        def grad(d_h_seq, d_cs_seq):
            gates = gates_out.stack()
            w_h_t = tf.transpose(w_h_product)   # once: a transposed matmul per step is slower (measured)
            cs_prev_seq = tf.concat([cs_0[None], cs_seq], 0)[:steps]
            h_prev_seq = tf.concat([h_0[None], h_seq], 0)[:steps]

            def back(k, d_h_next, d_cs_next, d_gates_out):
                t = steps - 1 - k
                i, ci, f, o = tf.split(gates[t], 4, axis=1)
                tanh_cs = tf.tanh(cs_seq[t])
                d_h = d_h_seq[t] + d_h_next
                d_cs = d_cs_seq[t] + d_cs_next + d_h * o * (1.0 - tanh_cs * tanh_cs)
                d_gates = tf.concat([d_cs * ci * i * (1.0 - i), d_cs * i * (1.0 - ci * ci),
                                     d_cs * cs_prev_seq[t] * f * (1.0 - f), d_h * tanh_cs * o * (1.0 - o)], 1)
                return k + 1, matmul(d_gates, w_h_t, product_dtype), d_cs * f, d_gates_out.write(t, d_gates)

            _, d_h_0, d_cs_0, d_gates_out = tf.while_loop(
                lambda k, *_: k < steps, back, [0, tf.zeros_like(h_0), tf.zeros_like(cs_0), array(4 * n_cell)],
                parallel_iterations=2, swap_memory=False)
            d_gates = tf.reshape(d_gates_out.stack(), [-1, 4 * n_cell])
            d_x = tf.pad(tf.reshape(matmul(d_gates, w_x, product_dtype, transpose_b=True), [steps, batch, n_input]),
                         pad_to_time)
            d_kernel = tf.concat([matmul(inputs, d_gates, product_dtype, transpose_a=True),
                                  matmul(tf.reshape(h_prev_seq, [-1, n_cell]), d_gates, product_dtype,
                                         transpose_a=True)], 0)
            return d_x, d_cs_0, d_h_0, d_kernel, tf.reduce_sum(d_gates, 0)

        return (tf.pad(h_seq, pad_to_time), tf.pad(cs_seq, pad_to_time)), grad

    h, cs = lstm(x, c_prev, h_prev, tf.convert_to_tensor(kernel), tf.convert_to_tensor(bias))
    return h, (final_state(c_prev, cs, seq_length), final_state(h_prev, h, seq_length))


# --lstm_impl values. Checkpoints are interchangeable: the same variables, cell and final state.
LSTM_IMPLS = ['auto', 'fused', 'scan']    # flags.py offers these


def lstm_function(lstm_impl='auto', mixed_precision=None):
    """'fused': fused_lstm (BlockLSTM); 'scan': scan_lstm (BlockLSTM's gradient is ~10x slower on CPU,
    doc/PERFORMANCE.rst); 'auto': fused when a GPU is visible, else scan. `mixed_precision` (the 16-bit
    type of --automatic_mixed_precision) is the scan LSTM's product type."""
    if lstm_impl == 'auto':
        lstm_impl = 'fused' if tf.config.list_physical_devices('GPU') else 'scan'
    return {'fused': fused_lstm, 'scan': functools.partial(scan_lstm, product_dtype=mixed_precision)}[lstm_impl]


def create_model(windows, seq_length, config, dropout_rates, initial_state=None, lstm=fused_lstm):
    """windows [B, T, 2*n_context+1, n_input] -> time-major logits [T, B, n_classes] and LSTM state.

    dropout_rates: six scalars (tensors), for layers 1, 2, 3, 4 (LSTM output), 5 and, as in
    DeepSpeech 0.9, the input of layer 6 (applied after layer 5's own rate)."""
    batch = size(windows, 0)
    hidden = dict(relu_clip=config.relu_clip, normalise=config.layer_norm)
    time_major = tf.transpose(windows, [1, 0, 2, 3])
    x = tf.reshape(time_major, [-1, config.window_width * config.n_input])
    layer_1 = dense('layer_1', x, config.n_hidden, dropout_rates[0], **hidden)
    layer_2 = dense('layer_2', layer_1, config.n_hidden, dropout_rates[1], **hidden)
    layer_3 = dense('layer_3', layer_2, config.n_hidden, dropout_rates[2], **hidden)
    rnn_input = tf.reshape(layer_3, [-1, batch, config.n_hidden])
    rnn_input.set_shape([windows.shape[1], windows.shape[0], config.n_hidden])   # static in exports
    rnn_output, state = lstm(rnn_input, seq_length, config.n_hidden, initial_state)
    rnn_output = tf.nn.dropout(tf.reshape(rnn_output, [-1, config.n_hidden]), rate=dropout_rates[3])
    layer_5 = dense('layer_5', rnn_output, config.n_hidden, dropout_rates[4], **hidden)
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
