"""What started this process, read from the environment its launcher left (horovodrun, mpirun, srun):
the one reader of those variables, so the log, the Slurm guard and the start-up report agree.
No TensorFlow and no Horovod here: anything may import it."""

GLOO_RENDEZVOUS = 'HOROVOD_GLOO_RENDEZVOUS_ADDR'    # set by horovodrun --gloo in each rank


def launcher(env):
    """Which launcher started this process (from its environment `env`; None: none), for the start-up
    log: Horovod takes rank and size from it (Gloo from horovodrun's variables, MPI from mpirun's or, under srun
    --mpi=pmix, from Slurm's PMIx server)."""
    if GLOO_RENDEZVOUS in env:
        return 'horovodrun (Gloo)'
    if 'SLURM_STEP_ID' in env:      # a task of an srun step (a batch script itself has no step id)
        return 'srun (Slurm job {}, step {}, {})'.format(env.get('SLURM_JOB_ID'), env['SLURM_STEP_ID'],
                                                      'PMIx' if 'PMIX_RANK' in env else 'no PMIx')
    if 'OMPI_COMM_WORLD_RANK' in env or 'PMI_RANK' in env:
        return 'mpirun'
    return None


def srun_task(env):
    """(tasks, this task's number) of the srun step whose task this process is, or None when srun did not
    start it (or started horovodrun, whose ranks are not srun's tasks)."""
    if 'SLURM_STEP_ID' not in env or GLOO_RENDEZVOUS in env:
        return None
    return int(env.get('SLURM_STEP_NUM_TASKS', 1)), int(env.get('SLURM_PROCID', 0))


def tags_lines(env):
    """True when the launcher prefixes each output line with the rank itself: horovodrun (`[0]<stdout>:`
    under Gloo; `--tag-output` to mpirun, `[1,0]<stdout>:`), `mpirun --tag-output`, `srun --label`."""
    return (GLOO_RENDEZVOUS in env or env.get('OMPI_MCA_orte_tag_output', '').lower() in ('1', 'true')
            or env.get('SLURM_LABELIO') == '1')


def env_rank(env):
    """The rank a launcher gave this process (Horovod's or Open MPI's variable), 0 without one."""
    return int(env.get('HOROVOD_RANK', env.get('OMPI_COMM_WORLD_RANK', 0)))
