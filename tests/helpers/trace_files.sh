#!/bin/sh
# Run a Horovod rank under strace, logging the file system calls of every rank to
# $TRACE_DIR/rank<N>.trace, so tests can see which rank opened, wrote or renamed what.
# $TRACE_CALLS replaces the list of calls traced; $TRACE_OPTIONS adds strace options (e.g. "-y -s 0"
# to see, for reads, which file each descriptor is, without the data).
rank="${HOROVOD_RANK:-${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}}"   # horovodrun, mpirun, srun
# shellcheck disable=SC2086 -- TRACE_OPTIONS is a list of options
exec strace -f -qq ${TRACE_OPTIONS:-} \
    -e trace="${TRACE_CALLS:-openat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat}" \
    -o "$TRACE_DIR/rank$rank.trace" "$@"
