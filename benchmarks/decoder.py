#!/usr/bin/env python3
"""The beam search (training/deepspeech_training/beam_search.py, on flashlight-text) against DeepSpeech 0.9's
ds_ctcdecoder 0.9.3, side by side in one run, on the same acoustic model outputs:

    python -m benchmarks.decoder --ds_python /path/to/py39-env/bin/python

ds_ctcdecoder 0.9.3 has wheels for Python 3.9 only, so it runs in a child process of a Python that has it
(--ds_python: `python3.9 -m venv env && env/bin/pip install ds_ctcdecoder==0.9.3 numpy`; without the flag,
<clients>/ds_ctcdecoder/bin/python if there, <clients> being $DS_CLIENTS_DIR or <this environment>/clients,
where the tests find it beside the released clients). Without one the table has the new decoder alone, and
says why.

What it decodes, made once and kept in --out_dir (a later run with the same settings reuses each part;
--fresh makes them anew):
  * a corpus of generated speech (benchmarks/make_speech_corpus.py, --utterances, a fifth of the sentences for
    test; test sentences are never train sentences) in <out_dir>/corpus-<N>/;
  * a model trained on it by `DeepSpeech.py` in one process (--train_flags: the small-corpus recipe at
    n_hidden 256, batch 16, --epochs), in <out_dir>/model/;
  * a KenLM scorer of the training transcripts (as benchmarks/quality.py makes it), in <corpus>/lm/;
  * the best-dev checkpoint's softmax outputs of every test utterance with its transcript and the greedy
    transcript: <out_dir>/outputs.npz (evaluate.acoustic_outputs on the test graph, as lm_optimizer.py
    keeps them; also the decoding flags' defaults).

Then every utterance is decoded by both decoders at each of --beams (default 32, 500, 1024), without and
with the scorer (--lm_alpha/--lm_beta, default DeepSpeech 0.9's flag defaults), cutoff_prob and
cutoff_top_n at the trainer's flag defaults: one utterance at a time on one thread
(ds_ctcdecoder.ctc_beam_search_decoder, not the batch decoder). The two take turns utterance by utterance
(which goes first alternates), so a change in the machine's load hits both alike; each call is timed alone,
from the softmax matrix to the transcript, after one untimed call per setting. The table gives per decoder
and setting WER and CER (jiwer over the whole set, as evaluate.summarize), milliseconds per utterance, the
time against ds_ctcdecoder's at the same setting, and how many transcripts are ds_ctcdecoder's to the
letter. Prints it, writes <out_dir>/decoder.txt and decoder.json (every transcript; for each utterance the
decoders disagree on, ds_ctcdecoder's top --explain hypotheses with their scores).
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

from benchmarks.common import ALPHABET, ROOT, fmt
from benchmarks.quality import make_scorer, run_logged

DS_WORKER = '--ds-ctcdecoder-worker'    # argv[1] of the child that decodes with ds_ctcdecoder
DUMP = '--dump-outputs'                 # argv[1] of the child that writes outputs.npz
TEST_FRACTION = 0.2
TRAIN_FLAGS = ('--flagfile {} --n_hidden 256 --train_batch_size 16 --dev_batch_size 16 --epochs 60'
               .format(os.path.join(ROOT, 'data', 'recipes', 'small-corpus.flags')))
DS_NAME, OURS_NAME = 'ds_ctcdecoder', 'flashlight'


def default_ds_python():
    """<clients>/ds_ctcdecoder/bin/python (<clients>: $DS_CLIENTS_DIR or <this environment>/clients, where
    bin/setup_clients.sh puts the released clients' environments and the tests look for them)."""
    clients = os.environ.get('DS_CLIENTS_DIR', os.path.join(sys.prefix, 'clients'))
    return os.path.join(clients, 'ds_ctcdecoder', 'bin', 'python')


def identity_of(path):
    try:
        with open(path) as previous:
            return json.load(previous)
    except (OSError, ValueError):
        return None


def write_json(path, value):
    with open(path, 'w') as out:
        json.dump(value, out, indent=2)


def make_corpus(out_dir, utterances):
    """<out_dir>/corpus-<N>: the CSVs of benchmarks/make_speech_corpus.py (it reuses the wavs there)."""
    corpus_dir = os.path.join(out_dir, 'corpus-{}'.format(utterances))
    if not os.path.exists(os.path.join(corpus_dir, 'test.csv')):
        subprocess.run([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', corpus_dir,
                        '--count', str(utterances), '--test_fraction', str(TEST_FRACTION)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    return corpus_dir


def train(corpus_dir, model_dir, train_flags, seed):
    """The checkpoint folder of a DeepSpeech.py run on the corpus (one made with the same flags is reused)."""
    identity = dict(corpus=os.path.abspath(corpus_dir), flags=train_flags, seed=seed)
    checkpoint_dir = os.path.join(model_dir, 'checkpoints')
    if identity_of(os.path.join(model_dir, 'identity.json')) == identity:
        return checkpoint_dir, identity
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)
    command = [sys.executable, os.path.join(ROOT, 'DeepSpeech.py'), '--train_files',
               os.path.join(corpus_dir, 'train.csv'), '--dev_files', os.path.join(corpus_dir, 'dev.csv'),
               '--checkpoint_dir', checkpoint_dir, '--summary_dir', os.path.join(model_dir, 'summaries'),
               '--alphabet_config_path', ALPHABET, '--random_seed', str(seed), '--noshow_progressbar'
               ] + shlex.split(train_flags)
    log = os.path.join(model_dir, 'output.txt')
    print('training the model: {} (log: {})'.format(' '.join(command[2:]), log), flush=True)
    exit_code, _, seconds = run_logged(command, log)
    if exit_code != 0:
        raise SystemExit('training failed (exit {}): see {}'.format(exit_code, log))
    print('trained in {:.0f} s'.format(seconds), flush=True)
    write_json(os.path.join(model_dir, 'identity.json'), identity)     # last: the model is complete
    return checkpoint_dir, identity


def dump_outputs(path, test_csv, checkpoint_dir, *model_flags):
    """(the DUMP child) The test set's softmax outputs from the best-dev checkpoint, with the references, the
    greedy transcripts and the decoding flags' defaults, into the .npz `path`."""
    from deepspeech_training.entry import quiet_tensorflow
    quiet_tensorflow('2')
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training import distributed
    from deepspeech_training.checkpoints import open_checkpoint
    from deepspeech_training.config import settings_from_args
    from deepspeech_training.data.plans import eval_set
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.decoding import greedy_decode
    from deepspeech_training.evaluate import acoustic_outputs, build_evaluation
    from deepspeech_training.flags import create_flags
    from deepspeech_training.util import logging
    tfv1.disable_eager_execution()
    create_flags()
    logging.configure(show_progressbar=False, log_level=2)
    settings = settings_from_args(['--alphabet_config_path', ALPHABET, '--checkpoint_dir', checkpoint_dir,
                                   '--load_evaluate', 'best'] + list(model_flags))
    records = read_sources([test_csv], settings.model.alphabet)
    single = distributed.Single()
    forward, iterators = build_evaluation(settings, [eval_set('test', records, 16, single)])
    probabilities = [None] * len(records)
    with open_checkpoint(settings, single) as session:
        iterators[0].restart(end_epoch=1)
        for indices, probs, lengths, _ in acoustic_outputs(session, iterators[0], forward):
            for index, p, length in zip(indices, probs, lengths):
                probabilities[index] = p[:length]
    decoding = settings.decoding
    write_outputs(path, probabilities, [r.transcript for r in records], [r.audio_name for r in records],
                  [greedy_decode(p, settings.model.alphabet) for p in probabilities],
                  dict(cutoff_prob=decoding.cutoff_prob, cutoff_top_n=decoding.cutoff_top_n,
                       lm_alpha=decoding.lm_alpha, lm_beta=decoding.lm_beta))


def write_outputs(path, probabilities, references, wavs, greedy, defaults):
    """An outputs .npz: the utterances' softmax matrices [time, classes] end to end, their lengths, the
    references, wav names and greedy transcripts, and `defaults` (the decoding flags' defaults) as JSON."""
    import numpy as np
    np.savez(path, probabilities=np.concatenate(probabilities), lengths=np.array([len(p) for p in probabilities]),
             references=np.array(references), wavs=np.array(wavs), greedy=np.array(greedy),
             defaults=json.dumps(defaults))


def outputs_file(out_dir, corpus_dir, checkpoint_dir, model_identity, train_flags):
    """<out_dir>/outputs.npz, written by a child process unless one of the same model is there."""
    path = os.path.join(out_dir, 'outputs.npz')
    identity_path = os.path.join(out_dir, 'outputs.json')
    if identity_of(identity_path) == model_identity and os.path.exists(path):
        return path
    log = os.path.join(out_dir, 'outputs.txt')
    command = [sys.executable, '-m', 'benchmarks.decoder', DUMP, path, os.path.join(corpus_dir, 'test.csv'),
               checkpoint_dir] + shlex.split(train_flags)
    if run_logged(command, log)[0] != 0:
        raise SystemExit('writing the acoustic model\'s outputs failed: see {}'.format(log))
    write_json(identity_path, model_identity)
    return path


def load_outputs(path):
    """(list of [time, classes] softmax matrices, dict of the rest) of an outputs .npz."""
    import numpy as np
    with np.load(path) as data:
        ends = np.cumsum(data['lengths'])
        probabilities = np.split(data['probabilities'], ends[:-1])
        rest = {name: data[name].tolist() for name in data.files if name not in ('probabilities', 'lengths')}
    rest['defaults'] = json.loads(rest['defaults'])
    return probabilities, rest


def ds_worker(outputs_path, alphabet_path, scorer_path, alpha, beta):
    """(the DS_WORKER child, in a Python with ds_ctcdecoder) Decode on request, one JSON line each way:
    {index, beam, scorer, cutoff_prob, cutoff_top_n, num_results} -> {seconds, results: [[score, text]]}."""
    import ds_ctcdecoder
    probabilities, _ = load_outputs(outputs_path)
    alphabet = ds_ctcdecoder.Alphabet(alphabet_path)
    scorer = ds_ctcdecoder.Scorer(float(alpha), float(beta), scorer_path, alphabet) if scorer_path else None
    print(json.dumps(dict(version=ds_ctcdecoder.__version__)), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        probs = probabilities[request['index']]
        started = time.perf_counter()
        results = ds_ctcdecoder.ctc_beam_search_decoder(
            probs, alphabet, request['beam'], request['cutoff_prob'], request['cutoff_top_n'],
            scorer if request['scorer'] else None, num_results=request['num_results'])
        seconds = time.perf_counter() - started
        print(json.dumps(dict(seconds=seconds, results=results)), flush=True)


class DsDecoder:
    """ds_ctcdecoder in its DS_WORKER child process."""

    def __init__(self, python, outputs_path, scorer_path, alpha, beta, decoding):
        self.decoding = decoding
        self.process = subprocess.Popen([python, '-m', 'benchmarks.decoder', DS_WORKER, outputs_path, ALPHABET,
                                         scorer_path or '', str(alpha), str(beta)], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True)
        ready = self.process.stdout.readline()
        if not ready:
            raise SystemExit('ds_ctcdecoder failed to start in {} (its error is above)'.format(python))
        self.version = json.loads(ready)['version']

    def decode(self, index, beam, scorer, num_results=1):
        """(seconds, [(score, transcript), ...]) of utterance `index`."""
        self.process.stdin.write(json.dumps(dict(index=index, beam=beam, scorer=scorer, num_results=num_results,
                                                 **self.decoding)) + '\n')
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer['seconds'], [tuple(result) for result in answer['results']]

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def find_ds_python(path):
    """(the Python to run ds_ctcdecoder in, None) or (None, why not)."""
    path = path or default_ds_python()
    if not os.path.exists(path):
        return None, 'no Python with ds_ctcdecoder at {}'.format(path)
    check = subprocess.run([path, '-c', 'import ds_ctcdecoder, numpy'], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
    if check.returncode != 0:
        return None, '{} cannot import ds_ctcdecoder and numpy: {}'.format(
            path, (check.stdout.strip().splitlines() or ['?'])[-1])
    return path, None


def compare(probabilities, references, settings, ds, scorer, decoding, explain=0):
    """Decode every utterance with both decoders (`ds` None: ours alone) at each (beam, with scorer)
    of `settings`, taking turns; {setting: {decoder: (transcripts, seconds)}} and, per setting, the
    utterances they disagree on."""
    from deepspeech_training.beam_search import BeamSearch
    from deepspeech_training.util.text import load_alphabet
    alphabet = load_alphabet(ALPHABET)
    results, differences = {}, {}
    for beam, with_scorer in settings:
        ours = BeamSearch(alphabet, beam, decoding['cutoff_prob'], decoding['cutoff_top_n'],
                          scorer if with_scorer else None)

        def decode_ours(index):
            started = time.perf_counter()
            text = ours.decode(probabilities[index])
            return time.perf_counter() - started, text

        def decode_ds(index):
            seconds, best = ds.decode(index, beam, with_scorer)
            return seconds, best[0][1] if best else ''
        decoders = {OURS_NAME: decode_ours, DS_NAME: decode_ds} if ds else {OURS_NAME: decode_ours}
        for decode in decoders.values():    # warm-up (KenLM's pages, the decoder's first allocations)
            decode(0)
        decoded = {name: ([], []) for name in decoders}
        for index in range(len(probabilities)):
            order = list(decoders) if index % 2 else list(decoders)[::-1]
            for name in order:
                seconds, text = decoders[name](index)
                decoded[name][0].append(text)
                decoded[name][1].append(seconds)
        results[(beam, with_scorer)] = decoded
        if ds:
            differences[(beam, with_scorer)] = [
                dict(index=index, reference=references[index], ds=ds_text, ours=ours_text,
                     ds_top=ds.decode(index, beam, with_scorer, explain)[1] if explain else [])
                for index, (ds_text, ours_text) in enumerate(zip(decoded[DS_NAME][0], decoded[OURS_NAME][0]))
                if ds_text != ours_text]
        print('beam {}{}: {}'.format(beam, ' + scorer' if with_scorer else '', ', '.join(
            '{} {:.1f} ms/utterance'.format(name, 1000 * sum(s) / len(s)) for name, (_, s) in decoded.items())),
            flush=True)
    return results, differences


def error_rates(references, transcripts):
    """(WER, CER) of the set: edit distances over reference lengths, summed over the set (evaluate.summarize)."""
    import jiwer
    return jiwer.wer(references, transcripts), jiwer.cer(references, transcripts)


def rows_of(references, greedy, results):
    """The table's rows: greedy, then per setting ds_ctcdecoder's and ours."""
    wer, cer = error_rates(references, greedy)
    rows = [dict(decoder='greedy', beam=1, scorer=False, wer=wer, cer=cer, ms=None, ratio=None, same=None)]
    for (beam, with_scorer), decoded in results.items():
        ds_texts, ds_seconds = decoded.get(DS_NAME, (None, None))
        for name, (texts, seconds) in sorted(decoded.items(), key=lambda item: item[0] != DS_NAME):
            wer, cer = error_rates(references, texts)
            rows.append(dict(decoder=name, beam=beam, scorer=with_scorer, wer=wer, cer=cer,
                             ms=1000 * sum(seconds) / len(seconds),
                             ratio=sum(seconds) / sum(ds_seconds) if ds_seconds else None,
                             same=sum(a == b for a, b in zip(texts, ds_texts)) if ds_texts else None))
    return rows


def table(rows, count):
    line = '{:<14} {:>5} {:>6} {:>7} {:>7} {:>8} {:>10} {:>12}'
    header = line.format('decoder', 'beam', 'scorer', 'WER', 'CER', 'ms/utt', 'time vs ds', 'same as ds')
    lines = [header, '-' * len(header)]
    for r in rows:
        lines.append(line.format(r['decoder'], r['beam'], 'yes' if r['scorer'] else 'no', fmt(r['wer'], '{:.4f}'),
                                 fmt(r['cer'], '{:.4f}'), fmt(r['ms'], '{:.2f}'), fmt(r['ratio'], '{:.2f}x'),
                                 '-' if r['same'] is None else '{}/{}'.format(r['same'], count)))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out_dir', default='decoder_results')
    parser.add_argument('--ds_python', help='a Python with ds_ctcdecoder==0.9.3 and numpy (default: {})'.format(
        default_ds_python()))
    parser.add_argument('--utterances', type=int, default=1000, help='corpus size (a fifth of it for test)')
    parser.add_argument('--train_flags', default=TRAIN_FLAGS, help='DeepSpeech.py flags of the model')
    parser.add_argument('--seed', type=int, default=1, help='--random_seed of the training run')
    parser.add_argument('--beams', default='32,500,1024', help='comma-separated beam widths')
    parser.add_argument('--lm_alpha', type=float, help='default: the trainer\'s --lm_alpha default (DeepSpeech 0.9\'s)')
    parser.add_argument('--lm_beta', type=float, help='default: the trainer\'s --lm_beta default (DeepSpeech 0.9\'s)')
    parser.add_argument('--explain', type=int, default=5, metavar='N',
                        help='ds_ctcdecoder\'s top N hypotheses of each utterance the decoders disagree on, in '
                             'decoder.json (0: none)')
    parser.add_argument('--fresh', action='store_true',
                        help='make the corpus (of this --utterances), model and outputs in --out_dir anew')
    args = parser.parse_args(argv)
    out_dir = os.path.abspath(args.out_dir)
    if args.fresh:      # what this benchmark made there, nothing else
        for name in ('corpus-{}'.format(args.utterances), 'model'):
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
        for name in ('outputs.npz', 'outputs.json', 'outputs.txt'):
            if os.path.exists(os.path.join(out_dir, name)):
                os.remove(os.path.join(out_dir, name))
    os.makedirs(out_dir, exist_ok=True)
    started = time.time()
    corpus_dir = make_corpus(out_dir, args.utterances)
    checkpoint_dir, model_identity = train(corpus_dir, os.path.join(out_dir, 'model'), args.train_flags, args.seed)
    scorer_path = make_scorer(corpus_dir)
    outputs_path = outputs_file(out_dir, corpus_dir, checkpoint_dir, model_identity, args.train_flags)
    probabilities, data = load_outputs(outputs_path)
    references = data['references']
    decoding = dict(cutoff_prob=data['defaults']['cutoff_prob'], cutoff_top_n=data['defaults']['cutoff_top_n'])
    alpha = data['defaults']['lm_alpha'] if args.lm_alpha is None else args.lm_alpha
    beta = data['defaults']['lm_beta'] if args.lm_beta is None else args.lm_beta
    print('{} test utterances ({} words, {:.0f} s of audio); prepared in {:.0f} s'.format(
        len(references), sum(len(r.split()) for r in references), sum(len(p) for p in probabilities) * 0.02,
        time.time() - started), flush=True)

    from importlib.metadata import version
    from deepspeech_training.scorer import load_scorer
    scorer = load_scorer(scorer_path, alpha, beta, ALPHABET, False)
    ds_python, missing = find_ds_python(args.ds_python)
    ds = DsDecoder(ds_python, outputs_path, scorer_path, alpha, beta, decoding) if ds_python else None
    if missing:
        print('ds_ctcdecoder left out: {}. Give --ds_python, a Python 3.9 with `pip install ds_ctcdecoder==0.9.3 '
              'numpy`; reporting the new decoder alone.'.format(missing), flush=True)
    settings = [(int(beam), with_scorer) for beam in args.beams.split(',') for with_scorer in (False, True)]
    load_before = os.getloadavg()
    decode_started = time.time()
    try:
        results, differences = compare(probabilities, references, settings, ds, scorer, decoding, args.explain)
    finally:
        if ds:
            ds.close()
    rows = rows_of(references, data['greedy'], results)
    heading = ('{} test utterances of {} ({} words); {} {} against {}; lm_alpha {}, lm_beta {} ({}); cutoff_prob {}, '
               'cutoff_top_n {}; load average {:.1f} before, {:.1f} after'.format(
                   len(references), corpus_dir, sum(len(r.split()) for r in references), OURS_NAME,
                   version('flashlight-text'), '{} {}'.format(DS_NAME, ds.version) if ds else 'nothing', alpha, beta,
                   'given' if args.lm_alpha is not None or args.lm_beta is not None else "the trainer's defaults",
                   decoding['cutoff_prob'], decoding['cutoff_top_n'], load_before[0], os.getloadavg()[0]))
    text = heading + '\n\n' + table(rows, len(references))
    with open(os.path.join(out_dir, 'decoder.txt'), 'w') as out:
        out.write(text + '\n')
    write_json(os.path.join(out_dir, 'decoder.json'), dict(
        corpus=corpus_dir, train_flags=args.train_flags, scorer=scorer_path, lm_alpha=alpha, lm_beta=beta,
        decoding=decoding, ds_ctcdecoder=ds.version if ds else None, ds_missing=missing,
        flashlight_text=version('flashlight-text'), decode_s=time.time() - decode_started, rows=rows,
        references=references, wavs=data['wavs'], greedy=data['greedy'],
        transcripts=[dict(beam=beam, scorer=with_scorer, **{name: texts for name, (texts, _) in decoded.items()})
                     for (beam, with_scorer), decoded in results.items()],
        differences=[dict(beam=beam, scorer=with_scorer, utterances=utterances)
                     for (beam, with_scorer), utterances in differences.items()]))
    print()
    print(text)
    return 0


if __name__ == '__main__':
    if sys.argv[1:2] == [DS_WORKER]:
        ds_worker(*sys.argv[2:])
    elif sys.argv[1:2] == [DUMP]:
        dump_outputs(*sys.argv[2:])
    else:
        sys.exit(main())
