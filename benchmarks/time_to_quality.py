"""Time to quality for the quality benchmark: how low each configuration's dev loss is after how many
seconds of wall time, so configurations that spend one budget differently (more epochs, larger batches, a
schedule) compare at equal time, not only at their end. Dev loss only: the trainer validates by loss, and a
greedy dev WER per epoch would cost a decoding pass per validation.

A run's curve comes from its dev summaries (one event per validation, stamped with the wall time it was
written), counted from the start of the run's process."""
import os
import statistics

from benchmarks.common import table as common_table

POINTS = 6      # wall times in the table, evenly spaced up to the longest configuration's mean wall time


def dev_curve(summary_dir, started):
    """[(seconds since `started`, dev loss)] of each validation of the run whose --summary_dir it is."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(os.path.join(summary_dir, 'dev')).Reload()
    if 'loss' not in events.Tags()['scalars']:
        return []
    return [(event.wall_time - started, event.value) for event in events.Scalars('loss')]


def mean_curve(curves):
    """The mean over seeds of the i-th validation's time and loss, for the validations every seed has."""
    curves = [curve for curve in curves if curve]
    length = min((len(curve) for curve in curves), default=0)
    return [(statistics.mean(curve[i][0] for curve in curves), statistics.mean(curve[i][1] for curve in curves))
            for i in range(length)]


def best_by(curve, seconds):
    """The lowest dev loss a curve reached within `seconds` (the checkpoint --load_evaluate best would
    pick had the run stopped then), None before its first validation."""
    losses = [loss for at, loss in curve if at <= seconds]
    return min(losses) if losses else None


def by_configuration(runs):
    """{label: its runs} in the order the configurations ran."""
    return {name: [r for r in runs if r['label'] == name] for name in dict.fromkeys(r['label'] for r in runs)}


def delivered_wer(run):
    """The greedy test WER of the weights the run delivers: its weight average under --ema_decay (what its
    own test, export and --one_shot_infer use), else its best-dev checkpoint; None if untested."""
    average = run.get('ema', {}).get('greedy', {}).get('wer')
    return run['single']['greedy']['wer'] if average is None else average


def table(runs):
    """A row per configuration: the mean over its seeds of the best dev loss reached by each of POINTS wall
    times, its mean wall time and mean greedy test WER of the weights it delivers."""
    configurations = by_configuration(runs)
    longest = max(statistics.mean(r['wall_s'] for r in mine) for mine in configurations.values())
    times = [round(longest * (i + 1) / POINTS) for i in range(POINTS)]
    rows = []
    for name, mine in configurations.items():
        curves = [r['dev_curve'] for r in mine if r.get('dev_curve')]
        row = dict(label=name, runs=len(curves), wall_s=statistics.mean(r['wall_s'] for r in mine))
        for t in times:
            reached = [best_by(curve, t) for curve in curves]
            row[t] = statistics.mean(reached) if curves and None not in reached else None
        wers = [delivered_wer(r) for r in mine if delivered_wer(r) is not None]
        row['wer'] = statistics.mean(wers) if wers else None
        rows.append(row)
    columns = ([('configuration', 'label', '{}'), ('runs', 'runs', '{}')]
               + [('{} s'.format(t), t, '{:.2f}') for t in times]
               + [('wall s', 'wall_s', '{:.0f}'), ('greedy WER', 'wer', '{:.3f}')])
    return ('best dev loss reached by each wall time, mean over seeds (dev WER per epoch is not measured)\n'
            + common_table(rows, columns))


def plot(runs, path):
    """The PNG: dev loss against wall time, a line per configuration (mean over seeds), and each seed's
    greedy test WER of its delivered weights against its wall time."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    figure, (losses, wers) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, mine in by_configuration(runs).items():
        curve = mean_curve([r.get('dev_curve') for r in mine])
        line, = losses.plot([at for at, _ in curve], [loss for _, loss in curve], marker='.', label=name)
        tested = [r for r in mine if delivered_wer(r) is not None]
        wers.scatter([r['wall_s'] for r in tested], [delivered_wer(r) for r in tested],
                     color=line.get_color(), label=name)
    losses.set_xlabel('wall time since the run started (s)')
    losses.set_ylabel('dev loss (mean over seeds)')
    losses.grid(True, alpha=0.3)
    losses.legend()
    wers.set_xlabel('training + greedy test wall time (s)')
    wers.set_ylabel('test WER (greedy, delivered weights), a point per seed')
    wers.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return figure
