import numpy as np

from deepspeech_training.decoding import greedy_decode
from deepspeech_training.evaluate import SampleResult, score, summarize


def test_wer_and_cer_of_one_sample():
    result = score(SampleResult('a.wav', 'the cat sat', 'the cat sad', 1.0))
    assert result.word_distance == 1 and result.word_length == 3
    assert abs(result.wer - 1 / 3) < 1e-9
    assert result.char_distance == 1 and abs(result.cer - 1 / 11) < 1e-9


def test_empty_hypothesis_is_all_deletions():
    result = score(SampleResult('a.wav', 'hello world', '', 1.0))
    assert result.wer == 1.0 and result.cer == 1.0


def test_set_wer_is_total_distance_over_total_words():
    results = [score(SampleResult('a', 'a b c d', 'a b c d', 1.0)), score(SampleResult('b', 'x y', 'x z', 3.0))]
    wer, cer, loss = summarize(results)
    assert abs(wer - 1 / 6) < 1e-9 and loss == 2.0


def test_greedy_decoding_merges_repeats_and_drops_blanks(alphabet):
    blank = 28
    path = [8, 8, blank, 9, blank, blank, 9, 0, 1]   # h h _ i _ _ i ' ' a
    log_probs = np.full((len(path), 29), -10.0)
    log_probs[np.arange(len(path)), path] = 0.0
    assert greedy_decode(log_probs, alphabet) == 'hii a'
