"""Who is who among the ranks, without TensorFlow: the chief rule and one process's ranks.

distributed.py builds its seam on these; util/logging.py asks them at every message, so the tools that
log but do not train (the importers: bin/import_*.py) start without importing TensorFlow (2-3 s of a
start)."""


def is_chief_rank(rank):
    """The chief rule: rank 0 alone writes checkpoints, summaries, flags.txt and exports, and logs infos."""
    return rank == 0


class OneProcess:
    """The ranks of a job of one process (distributed.Single adds its collectives)."""
    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    @property
    def is_chief(self):
        return is_chief_rank(self.rank)
