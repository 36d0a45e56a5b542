"""The TensorFlow session of a rank: its share of the cores, its GPU, the mixed-precision rewrite."""
import tensorflow.compat.v1 as tfv1

from .distributed import horovod_tuning
from .precision import enable_in_session_config
from .util.logging import log_info


def session_config(intra_op_threads=0, inter_op_threads=0, visible_gpu='', mixed_precision=None):
    """A Session config; 0 threads lets TensorFlow choose (the Horovod seam passes per-rank shares
    and the GPU of each rank); `mixed_precision` switches on that type's graph rewrite."""
    return enable_in_session_config(tfv1.ConfigProto(
        allow_soft_placement=True,
        intra_op_parallelism_threads=intra_op_threads,
        inter_op_parallelism_threads=inter_op_threads,
        gpu_options=tfv1.GPUOptions(allow_growth=True, visible_device_list=visible_gpu)), mixed_precision)


def create_session(dist, session_settings=None):
    """A Session with this rank's thread shares and GPU; --intra/inter_op_parallelism_threads win, and
    --automatic_mixed_precision's rewrite."""
    intra, inter = dist.threads_per_process()
    mixed_precision = None
    if session_settings:
        intra = session_settings.intra_op_parallelism_threads or intra
        inter = session_settings.inter_op_parallelism_threads or inter
        mixed_precision = session_settings.mixed_precision
    if dist.size > 1:
        log_info('{} rank(s) on this host: {} intra-op and {} inter-op thread(s) each; Horovod cycle time {} ms, '
                 'fusion buffer {} bytes'.format(dist.local_size, intra, inter, *horovod_tuning()))
    return tfv1.Session(config=session_config(intra, inter, dist.visible_gpu(), mixed_precision))
