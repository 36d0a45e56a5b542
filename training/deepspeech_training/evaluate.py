"""Decoding and WER/CER over test sets; under Horovod each rank decodes its shard and the chief
gathers every sample's result (by index) and reports, so the report equals the single-process one."""
import json
import os
from dataclasses import dataclass, asdict

import jiwer
import numpy as np
from ds_ctcdecoder import ctc_beam_search_decoder_batch

from .graph import run_set
from .util.flags import FLAGS
from .util.logging import log_info
from .util.text import labels_to_text


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


def greedy_decode(probs, alphabet):
    """Best path: argmax per frame, merge repeats, drop the blank (the last class).
    Written here because it is three lines; beam search goes through ds_ctcdecoder."""
    best = np.argmax(probs, axis=1)
    blank = probs.shape[1] - 1
    keep = [label for i, label in enumerate(best) if label != blank and (i == 0 or label != best[i - 1])]
    return labels_to_text(alphabet, keep)


class Decoder:
    """CTC decoding as the flags ask: ds_ctcdecoder's beam search (with the KenLM scorer if given,
    several processes per batch), or the greedy best path with --beam_width 1 and no scorer."""

    def __init__(self, alphabet, scorer=None):
        self.alphabet, self.scorer = alphabet, scorer
        self.processes = os.cpu_count() or 1

    def decode(self, probs, lengths):
        """probs [batch, time, classes] (softmax), lengths [batch] -> one transcript per sample."""
        if FLAGS.beam_width == 1 and self.scorer is None:
            return [greedy_decode(p[:n], self.alphabet) for p, n in zip(probs, lengths)]
        results = ctc_beam_search_decoder_batch(
            np.ascontiguousarray(probs, np.float64), list(lengths), self.alphabet, FLAGS.beam_width,
            num_processes=self.processes, cutoff_prob=FLAGS.cutoff_prob, cutoff_top_n=FLAGS.cutoff_top_n,
            scorer=self.scorer)
        return [beams[0][1] if beams else '' for beams in results]


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


def decode_set(session, input_set, forward, decoder, dist):
    """Every sample's SampleResult on the chief (sorted as the set), [] on the other ranks."""
    local = []

    def collect(values):
        real = values['weights'] > 0
        texts = decoder.decode(values['probabilities'][real], values['seq_length'][real])
        local.extend(zip(values['indices'][real].tolist(), texts, values['losses'][real].tolist()))

    run_set(session, input_set, forward, extra_fetches={'probabilities': forward.probabilities,
                                                        'seq_length': forward.seq_length}, on_batch=collect)
    gathered = dist.gather(session, local)
    if not dist.is_chief:
        return []
    decoded = sorted((item for rank_items in gathered for item in rank_items), key=lambda item: item[0])
    return [score(SampleResult(input_set.records[i].audio_path, input_set.records[i].transcript, text, loss))
            for i, text, loss in decoded]


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
    log_info('\n'.join(lines))
    return wer, cer, loss


def write_test_output(path, results):
    """--test_output_file: every sample of every test set as a JSON list."""
    with open(path + '.tmp', 'w', encoding='utf-8') as out:
        json.dump([asdict(r) for r in results], out, indent=2, ensure_ascii=False)
    os.replace(path + '.tmp', path)
    log_info('Wrote {} test results to {}'.format(len(results), path))
