#!/bin/sh
# Run a Horovod rank under strace, logging the file system calls of every rank to
# $TRACE_DIR/rank<N>.trace, so tests can see which rank opened, wrote or renamed what.
rank="${HOROVOD_RANK:-${OMPI_COMM_WORLD_RANK:-0}}"
exec strace -f -qq -e trace=openat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat \
    -o "$TRACE_DIR/rank$rank.trace" "$@"
