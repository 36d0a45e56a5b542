"""Testing and transcribing a checkpoint: decoding, WER/CER, DeepSpeech's report. Under Horovod each
rank decodes its shard and the chief gathers every sample's result (by index) and reports, so the
report equals the single-process one."""
import json
import os
from dataclasses import dataclass, asdict

import jiwer
import numpy as np
import tensorflow.compat.v1 as tfv1

from .. import distributed
from ..checkpoints import open_checkpoint
from ..data.plans import eval_set
from ..data.records import SampleRecord
from ..forward import build_forward
from ..iterators import build_input
from ..step_runner import set_steps
from ..train_graph import checkpoint_variables
from ..util.atomic import atomic_write
from ..util.logging import log_info, log_report


@dataclass
class SampleResult:
    wav_filename: str
    src: str
    res: str
    loss: float
    wer: float = 0.0
    cer: float = 0.0
    word_distance: int = 0
    word_length: int = 0
    char_distance: int = 0
    char_length: int = 0


def score(result):
    """Fill in the word and character edit distances (jiwer) of one sample."""
    words = jiwer.process_words(result.src, result.res)
    chars = jiwer.process_characters(result.src, result.res)
    result.word_distance = words.substitutions + words.deletions + words.insertions
    result.word_length = len(result.src.split())
    result.char_distance = chars.substitutions + chars.deletions + chars.insertions
    result.char_length = len(result.src)
    result.wer = result.word_distance / max(result.word_length, 1)
    result.cer = result.char_distance / max(result.char_length, 1)
    return result


def acoustic_outputs(session, iterator, forward, show_loss=True):
    """Batch by batch, the (indices, probabilities, lengths, losses) of the real samples of this rank's
    share of `iterator`'s set: what decoding needs of the acoustic model (the bar without a loss if not
    `show_loss`: files without a reference)."""
    fetches = {'probabilities': forward.probabilities, 'seq_length': forward.seq_length}
    for values in set_steps(session, iterator, forward, fetches=fetches, show_loss=show_loss):
        real = values['weights'] > 0
        yield (values['indices'][real], values['probabilities'][real], values['seq_length'][real],
               values['losses'][real])


def decode_outputs(session, outputs, records, decoder, dist):
    """Every sample's SampleResult on the chief (sorted as `records`), [] on the other ranks, from
    acoustic_outputs (a generator while testing; kept in memory by lm_optimizer, which decodes them
    once per trial)."""
    local = []
    for indices, probabilities, lengths, losses in outputs:
        local.extend(zip(indices.tolist(), decoder.decode(probabilities, lengths), losses.tolist()))
    gathered = dist.gather(session, local)
    if not dist.is_chief:
        return []
    decoded = sorted((item for rank_items in gathered for item in rank_items), key=lambda item: item[0])
    return [score(SampleResult(records[i].audio_name, records[i].transcript, text, loss)) for i, text, loss in decoded]


def decode_set(session, iterator, forward, decoder, dist, show_loss=True):
    """Every sample's SampleResult on the chief (sorted as the set), [] on the other ranks."""
    return decode_outputs(session, acoustic_outputs(session, iterator, forward, show_loss),
                          iterator.input_set.records, decoder, dist)


def summarize(results):
    """Set-level WER/CER (total edit distance over total length, as DeepSpeech) and mean loss."""
    word_length = sum(r.word_length for r in results)
    char_length = sum(r.char_length for r in results)
    return (sum(r.word_distance for r in results) / max(word_length, 1),
            sum(r.char_distance for r in results) / max(char_length, 1),
            float(np.mean([r.loss for r in results])) if results else 0.0)


def report(set_name, results, report_count):
    """Print DeepSpeech 0.9's test report: totals, then best, median and worst samples."""
    wer, cer, loss = summarize(results)
    rule = '-' * 80
    lines = ['Test on {} - WER: {:.6f}, CER: {:.6f}, loss: {:.6f}'.format(set_name, wer, cer, loss), rule]
    ordered = sorted(results, key=lambda r: (r.wer, r.cer, r.loss))
    middle = max(0, len(ordered) // 2 - report_count // 2)
    for title, chosen in (('Best WER:', ordered[:report_count]),
                          ('Median WER:', ordered[middle:middle + report_count]),
                          ('Worst WER:', ordered[-report_count:] if report_count else [])):
        lines += [title, rule]
        for r in chosen:
            lines += ['WER: {:.6f}, CER: {:.6f}, loss: {:.6f}'.format(r.wer, r.cer, r.loss),
                      ' - wav: file://{}'.format(os.path.abspath(r.wav_filename)),
                      ' - src: "{}"'.format(r.src), ' - res: "{}"'.format(r.res), rule]
    log_report('\n'.join(lines))
    return wer, cer, loss


def write_test_output(path, results):
    """--test_output_file: every sample of every test set as a JSON list."""
    with atomic_write(path, encoding='utf-8') as out:
        json.dump([asdict(r) for r in results], out, indent=2, ensure_ascii=False)
    log_info('Wrote {} test results to {}'.format(len(results), path))


def build_evaluation(settings, sets):
    """The graph that decodes `sets` from a checkpoint: (forward pass, a SetIterator per set)."""
    tfv1.reset_default_graph()
    batch, iterators = build_input(sets, settings.model)
    forward = build_forward(batch, settings.model, settings.session.mixed_precision)
    checkpoint_variables(position=False)
    return forward, iterators


def test(dist, settings, test_sets, decoder):
    """Decode each test set (name -> records) from the checkpoint --load_evaluate picks; print
    DeepSpeech's report. Returns {name: (WER, CER, loss)} on the chief."""
    decoding = settings.decoding
    sets = [eval_set('Test ' + name, records, decoding.test_batch_size, dist) for name, records in test_sets.items()]
    forward, iterators = build_evaluation(settings, sets)
    all_results, metrics = [], {}
    with open_checkpoint(settings, dist) as session:
        for iterator, name in zip(iterators, test_sets):
            iterator.restart(end_epoch=1)     # one pass
            log_info('Testing model on {}'.format(name))
            results = decode_set(session, iterator, forward, decoder, dist)
            if dist.is_chief:
                metrics[name] = report(name, results, decoding.report_count)
                all_results += results
    if dist.is_chief and decoding.test_output_file:
        write_test_output(decoding.test_output_file, all_results)
    return metrics


def transcribe(settings, wav_paths, decoder):
    """Transcripts of WAV files from the --load_evaluate checkpoint (the test graph, without labels)."""
    single = distributed.Single()
    records = [SampleRecord(path, 0, '', (0,), path, 0) for path in wav_paths]
    forward, iterators = build_evaluation(settings, [eval_set('Transcribing', records, 1, single)])
    with open_checkpoint(settings, single) as session:
        iterators[0].restart(end_epoch=1)
        return [r.res for r in decode_set(session, iterators[0], forward, decoder, single, show_loss=False)]
