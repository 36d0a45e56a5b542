"""benchmarks/training.py, pipeline.py, storage.py, scale.py and quality.py end to end on tiny configurations: they
run, and write their tables, JSON and plot (no timed asserts: the numbers depend on the machine);
benchmarks/decoder.py's decoding and table on a few synthetic softmax matrices."""
import json
import os
import re
import sys

import pytest

from tests.helpers.suite import ALPHABET, client_python, run_command

from tests.helpers import netns_sshfs

pytestmark = pytest.mark.slow


def test_benchmark_runs_one_and_two_ranks_and_writes_table_json_and_png(tmp_path):
    out = tmp_path / 'results'
    configs = 'h=16,b=2,lstm=fused,np=1;h=16,b=2,lstm=scan,np=2'
    run = run_command([sys.executable, '-m', 'benchmarks.training', '--configs', configs,
                       '--utterances', 16, '--corpus_dir', tmp_path / 'corpus', '--out_dir', out, '--repeats', 1,
                       '--matmul_size', 256], timeout=600)
    assert 'configuration' in run.output and 'matmul' in run.output
    table = (out / 'benchmark.txt').read_text()
    assert table.splitlines()[0].split()[:3] == ['configuration', 'timed', 'steps']
    for label in configs.split(';'):
        assert label in run.output and label in table
    report = json.loads((out / 'benchmark.json').read_text())
    assert report['machine']['matmul_gflops'] > 0
    single, double = report['results']
    corpus_bytes = report['corpus']['audio_bytes']
    for result, ranks in ((single, 1), (double, 2)):
        assert result['exit_code'] == 0
        assert result['samples_per_s'] > 0 and result['audio_s_per_s'] > 0 and result['median_step_s'] > 0
        assert result['time_to_first_step_s'] > 0 and result['gflops'] > 0
        assert len(result['peak_rss_mb']) == ranks and all(rss > 50 for rss in result['peak_rss_mb'])
        assert len(result['audio_bytes_read']) == ranks
    assert single['ratio'] == pytest.approx(1.0)
    # one process reads the whole training audio; each of two ranks reads only its shard of it, at most
    # half the corpus plus one batch (rank 1 takes the longer half of each length-sorted global batch)
    assert single['audio_bytes_read'][0] >= corpus_bytes
    assert double['read_bound_bytes'] < corpus_bytes
    assert all(0 < read <= double['read_bound_bytes'] for read in double['audio_bytes_read'])
    assert (out / 'benchmark.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_pipeline_benchmark_times_real_and_cached_batches_through_the_same_training_steps(tmp_path):
    out = tmp_path / 'results'
    cache = tmp_path / 'features'
    run = run_command([sys.executable, '-m', 'benchmarks.pipeline', '--configs',
                       'h=16,b=2;h=8,b=3,feature_cache={}'.format(cache), '--utterances', 16,
                       '--corpus_dir', tmp_path / 'corpus', '--samples', 7, '--pairs', 2, '--out_dir', out],
                      timeout=300)
    table = (out / 'pipeline.txt').read_text()
    assert table.splitlines()[0].split()[:4] == ['configuration', 'steps', 'pipeline', 'alone']
    assert 'h=16,b=2' in table and 'h=8,b=3,feature_cache=' in run.output
    assert cache.stat().st_size > 0    # the second configuration's real pipeline filled the trainer's cache
    report = json.loads((out / 'pipeline.json').read_text())
    for result, steps in zip(report['results'], (4, 3)):     # 7 samples in batches of 2 and of 3
        assert result['steps_per_epoch'] == steps
        for source in ('real', 'cached'):
            assert len(result['epochs'][source]) == 2
            assert all(len(epoch) == steps and min(epoch) > 0 for epoch in result['epochs'][source])
        assert result['ratio'] == pytest.approx(result['real_s_per_step'] / result['cached_s_per_step'])
        assert len(result['pair_ratios']) == 2
        assert result['pipeline_s_per_batch'] > 0 and result['cached_alone_s_per_batch'] > 0


def test_small_runs_benchmark_times_the_overfit_job_per_revision_with_a_breakdown():
    run = run_command([sys.executable, '-m', 'benchmarks.small_runs', '--revisions',
                       'HEAD', '--jobs', 'overfit', '--repeats', 1, '--overfit_epochs', 3, '--breakdown'],
                      timeout=300)
    wall, ratio = re.search(r'^overfit +HEAD +([\d.]+) +([\d.]+)$', run.output, re.M).groups()
    assert float(wall) > 0 and ratio == '1.00'                       # the baseline against itself
    for kind in ('iterator start', 'train step', 'eval/test step'):   # ms per epoch, timed by kind
        assert float(re.search(r'^{} +([\d.]+)$'.format(kind), run.output, re.M).group(1)) > 0, run.output


def cmdline(pid):
    try:
        with open('/proc/{}/cmdline'.format(pid), 'rb') as proc:
            return proc.read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:         # gone meanwhile
        return ''


def test_storage_benchmark_trains_from_local_disk_and_from_sshfs_with_added_latency(tmp_path):
    """Tiny: 6 train utterances, one latency, one rank, local WAV files and a .sdb over sshfs. (WAV files over
    sshfs too would be the same networked run, through the same mount, of the local run's reader.)"""
    reason = netns_sshfs.unavailable()
    if reason:
        pytest.skip('a networked filesystem (sshfs between network namespaces): ' + reason)
    out = tmp_path / 'results'
    run_command([sys.executable, '-m', 'benchmarks.storage', '--utterances', 8,
                 '--rtts', 2, '--np', 1, '--formats', 'sdb-wav', '--n_hidden', 16, '--batch_size', 2,
                 '--corpus_dir', tmp_path / 'corpus', '--out_dir', out], timeout=600)
    report = json.loads((out / 'storage.json').read_text())
    assert [r['label'] for r in report['results']] == ['local wav np=1 (for 2.0 ms)', 'sshfs 2.0 ms sdb-wav np=1']
    for result in report['results']:
        assert result['exit_code'] == 0 and result['median_step_s'] > 0 and result['input_s_per_epoch'] > 0
    # the relay adds the round trip it is asked for (sleeps overshoot a little, never undershoot)
    added = report['added_rtt_ms']['2.0']
    assert 2.0 <= added['through_relay'] - added['through_zero_relay'] < 4.0
    assert report['results'][0]['ratio'] == pytest.approx(1.0)
    # the networked runs read through the mount, which is gone afterwards
    assert str(out / 'mnt') in ' '.join(map(str, report['results'][1]['command']))
    assert not netns_sshfs.is_mounted(out / 'mnt')
    assert not [pid for pid in os.listdir('/proc') if pid.isdigit() and str(out / 'sshd') in cmdline(pid)], \
        'an ssh client (or its relay) of the benchmark outlived its mount'
    table = (out / 'storage.txt').read_text()
    assert 'target (.sdb or tar at 2.0 ms, np=1' in table and 'load average' in table
    assert (out / 'storage.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_step_profile_puts_every_matmul_in_bfloat16_with_the_flag_and_none_without():
    """Tiny: the profile's categories add up, and on a CPU with bfloat16 the rewrite turned the matmuls."""
    from deepspeech_training.precision import cpu_has_bfloat16
    if not cpu_has_bfloat16():
        pytest.skip('the CPU lacks amx_bf16 and avx512_bf16: no bfloat16 rewrite to profile')
    output = run_command([sys.executable, '-m', 'benchmarks.profile_training_step', '--n_hidden', 32,
                          '--batch', 2, '--frames', 20, '--warmup', 1, '--repeats', 1], timeout=300).output
    rows = {match[0].strip(): [float(v) for v in match[1:]] for match in re.findall(
        r'^(matmul outside loops|LSTM loop matmul)\s+([\d.]+)\s+[\d.]+%\s+([\d.]+)\s+[\d.]+%\s+(\d+)%', output, re.M)}
    assert set(rows) == {'matmul outside loops', 'LSTM loop matmul'}, output
    assert all(f32 > 0 and bf16 > 0 and bf16_share == 100 for f32, bf16, bf16_share in rows.values()), output
    float32_types = output[output.index('float32 ops by type'):output.index('bfloat16 ops by type')]
    assert 'bfloat16' not in float32_types.replace('float32 ops by type', ''), output


def test_quality_benchmark_tests_each_configuration_per_seed_and_reuses_finished_runs(tmp_path):
    """Tiny: two Horovod ranks with --ema_decay, greedy, beam and beam + scorer, the best-dev checkpoint, the mean
    of the last two and the weight average; then the same command with --resume trains nothing, and with other
    tests it keeps the training and redoes the tests. (One process differs only in its command:
    test_configurations_name_their_ranks_and_flags.)"""
    out = tmp_path / 'results'
    recipe = tmp_path / 'recipe.flags'     # a flagfile after --base_flags (the shipped ones set a model size)
    recipe.write_text('--layer_norm\n--shuffle_batches\n--augment=frequency_mask[p=0.8,n=2:4,size=2:4]\n')
    two_ranks = 'name=recipe,np=2,flagfile={},ema_decay=0.9'.format(recipe)
    command = [sys.executable, '-m', 'benchmarks.quality', '--configs', two_ranks,
               '--seeds', 1, '--utterances', 20, '--corpus_dir', tmp_path / 'corpus', '--out_dir', out,
               '--scorer', '--lm_trials', 2, '--beam_width', 8, '--average', 2,
               '--base_flags', '--n_hidden 16 --train_batch_size 4 --dev_batch_size 4 --test_batch_size 4 --epochs 2']
    recipe_run = out / 'runs' / 'recipe-seed1'
    stale = recipe_run / 'summaries' / 'dev' / 'events.out.tfevents.1.interrupted'    # of a run stopped midway
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b'')
    run_command(command, timeout=600)
    assert not stale.exists()
    assert 'x 2 rank(s)' in (recipe_run / 'output.txt').read_text()
    assert (recipe_run / 'averaged' / 'best_dev_checkpoint').is_file()
    for tuned in ('test', 'ema'):      # the best-dev checkpoint and the weight average, each for itself
        assert 'Best params: lm_alpha=' in (recipe_run / (tuned + '-lm_optimizer.txt')).read_text()
    used = (recipe_run / 'checkpoints' / 'flags.txt').read_text().splitlines()
    with open(recipe) as flagfile:
        assert set(line.strip() for line in flagfile if line.startswith('--')) <= set(used)
    first_table = (out / 'quality.txt').read_text()
    output = run_command(command + ['--resume'], timeout=600).output
    assert output.count('(exit 0, reused)') == 1 and output.count('seed 1: WER') == 1
    assert (out / 'quality.txt').read_text() == first_table
    table = first_table.splitlines()
    assert table[0].split()[:3] == ['configuration', 'np', 'runs']
    assert [column + ' ' + metric for column, metric in re.findall(r'(\w+) (WER|CER) \(sd\)', table[0])] == [
        decoding + ' ' + metric for decoding in ('greedy', 'beam', 'scorer') for metric in ('WER', 'CER')]
    assert [line.split()[:3] for line in table[2:]] == [['recipe', '2', '1'], ['recipe', 'avg2', '2'],
                                                      ['recipe', 'ema', '2']]
    report = json.loads((out / 'quality.json').read_text())
    runs = report['runs']
    assert [(r['label'], r['np'], r['seed'], r['exit_code'], r['epochs']) for r in runs] == [('recipe', 2, 1, 0, 2)]
    for r in runs:
        assert len(r['dev_losses']) == 2 and r['wall_s'] > 0 and r['test_s'] > 0
        assert len(r['lm_weights']) == len(r['ema_lm_weights']) == 2
        for checkpoint in ('single', 'averaged', 'ema'):
            assert sorted(r[checkpoint]) == ['beam', 'greedy', 'scorer']
            assert all(0 <= m['wer'] and 0 <= m['cer'] for m in r[checkpoint].values())
    assert all(s['failed'] == 0 for s in report['summaries'])
    assert [loss for _, loss in runs[0]['dev_curve']] == pytest.approx(runs[0]['dev_losses'], rel=1e-5)
    assert 0 < runs[0]['dev_curve'][0][0] < runs[0]['dev_curve'][1][0] < runs[0]['wall_s']
    curves = (out / 'time_to_quality.txt').read_text().splitlines()
    assert curves[1].split()[:2] == ['configuration', 'runs'] and [line.split()[:2] for line in curves[3:]] == [
        ['recipe', '1']]
    assert '\n'.join(curves) in output

    training_log = (recipe_run / 'output.txt').stat().st_mtime_ns
    retest = [arg for arg in command if arg != '--scorer']
    retest[retest.index('--beam_width') + 1] = 4
    output = run_command(retest + ['--resume'], timeout=600).output
    assert output.count('(exit 0, training reused)') == 1, output
    assert (recipe_run / 'output.txt').stat().st_mtime_ns == training_log
    retested = json.loads((out / 'quality.json').read_text())['runs'][0]
    assert retested['identity']['beam_width'] == 4 and retested['wall_s'] == runs[0]['wall_s']
    assert retested['single']['greedy'] == runs[0]['single']['greedy']
    assert all(sorted(retested[checkpoint]) == ['beam', 'greedy'] for checkpoint in ('single', 'averaged', 'ema'))
    assert (out / 'quality.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.fast
def test_time_to_quality_is_the_best_dev_loss_reached_by_each_time_a_line_per_configuration(tmp_path):
    """Two configurations of two seeds: a row and a line each, the mean over seeds of the lowest dev loss
    reached by then (a later rise does not count), '-' before a seed's first validation; the WER is of the
    weights a run delivers (its weight average when it has one)."""
    from benchmarks import time_to_quality

    def run(name, wall_s, curve, wer):
        return dict(label=name, wall_s=wall_s, dev_curve=curve, single=dict(greedy=dict(wer=wer)))
    runs = [run('slow', 60, [(20, 9.0), (40, 5.0), (60, 7.0)], 0.4), run('fast', 30, [(15, 6.0), (30, 4.0)], 0.3),
            run('slow', 60, [(20, 7.0), (40, 3.0), (60, 1.0)], 0.2), run('fast', 30, [(5, 6.0), (30, 2.0)], 0.1)]
    runs[1]['ema'] = dict(greedy=dict(wer=0.1))     # 'fast' seed 1 delivers its weight average
    lines = time_to_quality.table(runs).splitlines()
    assert lines[1].split() == ['configuration', 'runs', '10', 's', '20', 's', '30', 's', '40', 's', '50', 's', '60',
                                's', 'wall', 's', 'greedy', 'WER']
    assert [line.split() for line in lines[3:]] == [
        ['slow', '2', '-', '8.00', '8.00', '4.00', '4.00', '3.00', '60', '0.300'],
        ['fast', '2', '-', '6.00', '3.00', '3.00', '3.00', '3.00', '30', '0.100']]
    figure = time_to_quality.plot(runs, tmp_path / 'quality.png')
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ['slow', 'fast']
    assert list(figure.axes[0].get_lines()[1].get_xdata()) == [10, 30]
    assert sorted(figure.axes[1].collections[1].get_offsets()[:, 1]) == [0.1, 0.1]
    assert (tmp_path / 'quality.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.fast
def test_configurations_name_their_ranks_and_flags():
    """`key=value` pairs run on --np ranks (one process by default), `np=N` on N, named by `name` or their
    pairs; labels must differ."""
    from benchmarks import common
    configs = common.parse_configs('name=one,epochs=3; name=two,np=2,b=8 ;h=16')
    assert [(common.label(c), int(c['np']), common.flags(c)) for c in configs] == [
        ('one', 1, ['--epochs=3']), ('two', 2, ['--train_batch_size=8']), ('h=16,np=1', 1, ['--n_hidden=16'])]
    assert [c['np'] for c in common.parse_configs('name=a;name=b,np=1', ranks=4)] == ['4', '1']
    with pytest.raises(ValueError, match='labels must differ: a, a'):
        common.parse_configs('name=a;name=a,np=2')


def test_scale_benchmark_reports_each_start_up_phase_and_its_growth_per_source(tmp_path):
    """Tiny: 300 and 1000 samples of a one-voice pool, one local rank, CSV and tar shards, each started with an
    empty data cache and again with the one the first start filled. (The .sdb is made and read all the same:
    the planning pass reads it, --plan_source's default; its start-ups would be those of another reader.)"""
    out = tmp_path / 'results'
    run = run_command([sys.executable, '-m', 'benchmarks.scale', '--sizes', '300,1000',
                       '--np', 1, '--storages', 'local', '--sources', 'csv,tar', '--voices', 'en-us',
                       '--shard_size', 400, '--work_dir', tmp_path / 'corpus', '--out_dir', out], timeout=900)
    phases = ['import', 'read sources', 'validation', 'planning', 'graph', 'first batch']
    table = (out / 'scale.txt').read_text()
    header = table.splitlines()[0]
    assert all(phase in header for phase in phases) and 'RSS MB' in header and 'load average' in table
    assert table in run.output.replace('\r', '')
    report = json.loads((out / 'scale.json').read_text())
    labels = ['{} local np=1 {}'.format(source, start) for source in ('csv', 'tar') for start in ('first', 'second')]
    assert [(r['label'], r['n']) for r in report['results']] == [(label, n) for n in (300, 1000) for label in labels]
    by_label = {(r['label'], r['n']): r for r in report['results']}
    for n in (300, 1000):       # a second start of a CSV stats its files: the first read their headers
        assert by_label['csv local np=1 second', n]['read_calls'] < by_label['csv local np=1 first', n]['read_calls'] - n / 2
    for result in report['results']:
        assert result['exit_code'] == 0 and result['total_s'] > 0 and result['rss_mb'] > 50
        assert result['read_calls'] > 0 and result['requests'] is None
        # the run's own report (util/startup.py): every phase, in order, adding up to the time to the first step
        with open(os.path.join(result['run_dir'], 'startup.0')) as first_rank:
            rank = json.load(first_rank)
        assert list(rank['phases']) == phases and rank['process_start_known']
        assert sum(rank['phases'].values()) == pytest.approx(rank['seconds_to_first_step'], abs=0.01)
        assert set(rank['io']) == {'rchar', 'syscr', 'read_bytes'}
    for label in labels:
        assert isinstance(report['growth'][label]['total_s'], float) and label in table
        assert re.search(r'^{} +(-?[\d.]+ +){{4}}'.format(re.escape(label)), table.split('growth k')[1], re.M)
    assert set(report['planning']['growth']) == {'train_plan_s', 'eval_plan_s'}
    assert [p['n'] for p in report['planning']['results']] == [300, 1000]


def decoder_benchmark_outputs(tmp_path):
    """benchmarks/decoder.py (the module) and an outputs file of it read back: peaky softmax matrices of
    three sentences, the second spoken with one word wrong ('word' for 'world': 1 of 7 words, 1 of 34
    characters)."""
    import numpy as np
    from benchmarks import decoder as benchmark_decoder
    from deepspeech_training.util.text import load_alphabet
    alphabet = load_alphabet(ALPHABET)
    references = ['the cat sat', 'hello world', 'good morning']
    rng = np.random.default_rng(0)
    probabilities = []
    for text in ('the cat sat', 'hello word', 'good morning'):
        frames = []
        for label in [alphabet.GetSize()] + list(alphabet.Encode(text)):    # a blank frame, then each letter ...
            for peak in (label, alphabet.GetSize()):                        # ... followed by a blank
                frame = rng.uniform(0.0, 0.1, alphabet.GetSize() + 1)
                frame[peak] = 3.0
                frames.append(frame / frame.sum())
        probabilities.append(np.array(frames, np.float32))
    path = str(tmp_path / 'outputs.npz')
    benchmark_decoder.write_outputs(path, probabilities, references, ['a.wav', 'b.wav', 'c.wav'],
                                    ['the cat sat', 'hello word', 'good morning'],
                                    dict(cutoff_prob=1.0, cutoff_top_n=300, lm_alpha=0.9, lm_beta=1.2))
    loaded, data = benchmark_decoder.load_outputs(path)
    assert all(np.array_equal(a, b) for a, b in zip(loaded, probabilities)) and len(loaded) == 3
    assert data['references'] == references and data['defaults']['cutoff_top_n'] == 300
    return benchmark_decoder, path, loaded, data


@pytest.mark.fast
def test_decoder_benchmark_decodes_and_tabulates_synthetic_outputs(tmp_path):
    """The new decoder alone (no ds_ctcdecoder): WER/CER over the set, a row per setting after greedy's."""
    benchmark_decoder, _, probabilities, data = decoder_benchmark_outputs(tmp_path)
    decoding = dict(cutoff_prob=1.0, cutoff_top_n=300)
    results, differences = benchmark_decoder.compare(probabilities, data['references'], [(4, False), (16, False)],
                                                     None, None, decoding)
    assert differences == {} and list(results) == [(4, False), (16, False)]
    assert results[(16, False)]['flashlight'][0] == ['the cat sat', 'hello word', 'good morning']
    rows = benchmark_decoder.rows_of(data['references'], data['greedy'], results)
    assert [(r['decoder'], r['beam']) for r in rows] == [('greedy', 1), ('flashlight', 4), ('flashlight', 16)]
    for row in rows:
        assert row['wer'] == pytest.approx(1 / 7) and row['cer'] == pytest.approx(1 / 34)
        assert row['ratio'] is None and row['same'] is None
    assert all(r['ms'] > 0 for r in rows[1:])
    table = benchmark_decoder.table(rows, 3).splitlines()
    assert table[0].split() == ['decoder', 'beam', 'scorer', 'WER', 'CER', 'ms/utt', 'time', 'vs', 'ds', 'same',
                                'as', 'ds']
    assert table[3].split()[:5] == ['flashlight', '4', 'no', '0.1429', '0.0294'] and len(table) == 5


@pytest.mark.fast
def test_decoder_benchmark_runs_ds_ctcdecoder_beside_it(tmp_path):
    """The same with ds_ctcdecoder 0.9.3 in its Python beside the clients (skipped where there is none): both
    give the transcripts, timed, its rows come first and count the new decoder's identical transcripts."""
    python = client_python('ds_ctcdecoder')
    benchmark_decoder, path, probabilities, data = decoder_benchmark_outputs(tmp_path)
    ds_python, missing = benchmark_decoder.find_ds_python(python)
    assert not missing
    decoding = dict(cutoff_prob=1.0, cutoff_top_n=300)
    ds = benchmark_decoder.DsDecoder(ds_python, path, None, 0.9, 1.2, decoding)
    try:
        assert ds.version == '0.9.3'
        results, differences = benchmark_decoder.compare(probabilities, data['references'], [(8, False)], ds, None,
                                                         decoding, explain=2)
    finally:
        ds.close()
    assert differences == {(8, False): []}
    assert results[(8, False)]['ds_ctcdecoder'][0] == ['the cat sat', 'hello word', 'good morning']
    rows = benchmark_decoder.rows_of(data['references'], data['greedy'], results)
    assert [r['decoder'] for r in rows] == ['greedy', 'ds_ctcdecoder', 'flashlight']
    assert rows[1]['ratio'] == pytest.approx(1.0) and rows[2]['ratio'] > 0
    assert rows[1]['same'] == rows[2]['same'] == 3
