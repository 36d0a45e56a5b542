"""--automatic_mixed_precision (DeepSpeech 0.9's flag): matrix products in a 16-bit float, variables,
checkpoints and exports in float32 with DeepSpeech's names.

- CPUs with AMX-BF16 or AVX512-BF16: TensorFlow's oneDNN grappler pass rewrites the graph to bfloat16
  where its lists allow (MatMul, BiasAdd, ReLU...; CTC loss, softmax and reductions stay float32).
  bfloat16 has float32's exponent range, so no loss scaling is needed.
- GPUs: TensorFlow's float16 rewrite with dynamic loss scaling (the optimizer wrapper DeepSpeech 0.9
  used). Written to TensorFlow's documented API, not measured here (no GPU on these machines).
"""
import os

import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from tensorflow.core.protobuf import rewriter_config_pb2

from .util.logging import log_info, log_warn

BFLOAT16 = 'bfloat16'
FLOAT16 = 'float16'
BF16_CPU_FLAGS = ('amx_bf16', 'avx512_bf16')


def cpu_has_bfloat16():
    """Whether this CPU multiplies bfloat16 natively (Linux /proc/cpuinfo flags)."""
    try:
        with open('/proc/cpuinfo') as cpuinfo:
            flags = {word for line in cpuinfo if line.startswith('flags') for word in line.split()}
    except OSError:
        return False
    return any(flag in flags for flag in BF16_CPU_FLAGS)


def mixed_precision_mode(requested):
    """None (float32), BFLOAT16 or FLOAT16 for this process; says at start which, and why not when the
    flag cannot apply here."""
    if not requested:
        return None
    if tf.config.list_physical_devices('GPU'):
        log_info('Mixed precision: float16 with dynamic loss scaling on the GPU')
        return FLOAT16
    if not cpu_has_bfloat16():
        log_warn('--automatic_mixed_precision has no effect here: no GPU, and the CPU lacks {} (training in '
                 'float32)'.format(' and '.join(BF16_CPU_FLAGS)))
        return None
    if os.environ.get('TF_ENABLE_ONEDNN_OPTS') == '0':
        log_warn('--automatic_mixed_precision has no effect with TF_ENABLE_ONEDNN_OPTS=0: the bfloat16 rewrite is '
                 'oneDNN\'s (training in float32)')
        return None
    log_info('Mixed precision: bfloat16 on the CPU (oneDNN)')
    return BFLOAT16


def enable_in_session_config(config, mode):
    """Switch the grappler rewrite of `mode` on in a ConfigProto."""
    rewrites = config.graph_options.rewrite_options
    if mode == BFLOAT16:
        rewrites.auto_mixed_precision_onednn_bfloat16 = rewriter_config_pb2.RewriterConfig.ON
    elif mode == FLOAT16:
        rewrites.auto_mixed_precision = rewriter_config_pb2.RewriterConfig.ON
    return config


def wrap_optimizer(optimizer, mode):
    """float16 needs its loss scaled (dynamically) so small gradients do not flush to zero."""
    if mode == FLOAT16:
        return tfv1.mixed_precision.MixedPrecisionLossScaleOptimizer(optimizer, 'dynamic')
    return optimizer
