"""CTC beam search as DeepSpeech 0.9's ds_ctcdecoder did it, on flashlight-text's decoders (maintained,
with wheels for the Pythons we train on; the decoder behind torchaudio's).

With a scorer, flashlight's LexiconDecoder is set up to score as DeepSpeech's prefix beam search
(doc/LM.rst, "The decoder", says where results can still differ and why):
- alpha weighs the natural-log LM probability: flashlight's KenLM gives log10, so its weight is alpha x ln 10;
  beta is its word score;
- words are spelt with the space that ends them, so a word is scored when its space is emitted, and
  only words of the package's vocabulary can be spelt (no unknown-word score); no look-ahead smearing;
- the last word is scored at the end though no space follows (one extra frame that emits only the
  space);
- the alignments of a prefix are summed (log_add);
- each frame keeps the characters DeepSpeech's cutoff_prob / cutoff_top_n keep, and leading frames
  whose blank probability is >= 0.999 are skipped, as DeepSpeech does;
- flashlight's final beam only proposes: the distinct transcripts it ranks best are ranked again by
  DeepSpeech's own score, computed exactly (best_by_deepspeechs_score), since flashlight also reaches
  transcripts through silences DeepSpeech's dictionary forbids, and adds P(</s>).
Without a scorer, flashlight's LexiconFreeDecoder with no LM is plain prefix beam search.

flashlight's decoders hold the GIL, so where DeepSpeech decoded a batch on a thread per core, BeamSearchPool
decodes on worker processes.
"""
import math
import multiprocessing

import numpy as np
from flashlight.lib.text.decoder import (CriterionType, LexiconDecoder, LexiconDecoderOptions, LexiconFreeDecoder,
                                         LexiconFreeDecoderOptions, ZeroLM)

FLT_MIN = np.finfo(np.float32).tiny        # DeepSpeech adds it before the log
START_BLANK = 0.999                        # DeepSpeech starts expanding at the first frame with blank < this
# A class pruned from a frame gets this log probability, not -inf: flashlight's log-add of two -inf
# hypotheses is NaN, which breaks its sort. The beam threshold drops every path through one.
PRUNED = np.float32(-1e30)
# Hypotheses further than this (natural log) below a frame's best are dropped: DeepSpeech skipped, in a full
# beam, those that could not beat its worst one. Measured on a trained model's outputs (benchmarks/decoder.py):
# the same transcripts as with no threshold at beams 32-1024, three times faster at 500 and 1024.
BEAM_THRESHOLD = 30.0
# How many of flashlight's best distinct transcripts DeepSpeech's score ranks again.
RERANKED = 8


def frame_log_probs(probs, cutoff_prob, cutoff_top_n):
    """Log probabilities [time, classes] (float32) with what DeepSpeech's get_pruned_log_probs drops at
    PRUNED: per frame, the most likely classes until their sum reaches cutoff_prob, at most cutoff_top_n."""
    log_probs = np.log(probs + FLT_MIN).astype(np.float32)
    classes = probs.shape[1]
    if cutoff_prob >= 1.0 and cutoff_top_n >= classes:
        return log_probs
    order = np.argsort(-probs, axis=1, kind='stable')
    keep = np.full(len(probs), min(cutoff_top_n, classes))
    if cutoff_prob < 1.0:
        reached = np.cumsum(np.take_along_axis(probs, order, axis=1), axis=1) >= cutoff_prob
        keep = np.minimum(keep, np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, classes))
    dropped = np.arange(classes)[None, :] >= keep[:, None]
    np.put_along_axis(log_probs, order, np.where(dropped, PRUNED, np.take_along_axis(log_probs, order, axis=1)),
                      axis=1)
    return log_probs


class BeamSearch:
    """decode(probs) -> transcript, for one utterance's softmax outputs [time, alphabet size + 1]."""

    def __init__(self, alphabet, beam_width, cutoff_prob=1.0, cutoff_top_n=40, scorer=None):
        self.alphabet, self.scorer, self.beam_width = alphabet, scorer, beam_width
        self.cutoff_prob, self.cutoff_top_n = cutoff_prob, cutoff_top_n
        self.blank = alphabet.GetSize()
        self.space = alphabet.GetSpaceLabel()
        classes = alphabet.GetSize() + 1
        if scorer is None:
            options = LexiconFreeDecoderOptions(beam_size=beam_width, beam_size_token=classes,
                                                beam_threshold=BEAM_THRESHOLD, lm_weight=0.0, sil_score=0.0,
                                                log_add=True, criterion_type=CriterionType.CTC)
            self.decoder = LexiconFreeDecoder(options, ZeroLM(), self.space, self.blank, [])
            return
        self.lm_weight = scorer.alpha * math.log(10)
        options = LexiconDecoderOptions(beam_size=beam_width, beam_size_token=classes, beam_threshold=BEAM_THRESHOLD,
                                        lm_weight=self.lm_weight, word_score=scorer.beta, unk_score=-math.inf,
                                        sil_score=0.0, log_add=True, criterion_type=CriterionType.CTC)
        self.decoder = LexiconDecoder(options, scorer.trie, scorer.lm, self.space, self.blank, -1, [], False)
        self.last_word_frame = np.full((1, classes), PRUNED, np.float32)
        self.last_word_frame[0, self.space] = 0.0

    def __reduce__(self):
        """Rebuilt from its settings where it is unpickled (a pool's worker)."""
        return BeamSearch, (self.alphabet, self.beam_width, self.cutoff_prob, self.cutoff_top_n, self.scorer)

    def with_lm_weights(self, alpha, beta):
        """This search with the scorer's alpha and beta set to these (lm_optimizer's trials)."""
        self.scorer.alpha, self.scorer.beta = alpha, beta
        return BeamSearch(self.alphabet, self.beam_width, self.cutoff_prob, self.cutoff_top_n, self.scorer)

    def decode(self, probs):
        probs = np.asarray(probs, np.float64)
        expanding = np.flatnonzero(probs[:, self.blank] < START_BLANK)
        if not len(expanding):
            return ''
        log_probs = frame_log_probs(probs[expanding[0]:], self.cutoff_prob, self.cutoff_top_n)
        if self.scorer is None:
            results = self.search(log_probs)
            return self.alphabet.Decode(self.collapse(results[0].tokens[1:-1])) if results else ''
        return self.best_by_deepspeechs_score(self.search(np.concatenate([log_probs, self.last_word_frame])),
                                              log_probs)

    def search(self, log_probs):
        log_probs = np.ascontiguousarray(log_probs)
        return self.decoder.decode(log_probs.ctypes.data, len(log_probs), log_probs.shape[1])

    def best_by_deepspeechs_score(self, results, log_probs):
        """The transcript DeepSpeech's decoder ranks first among flashlight's best RERANKED: the log of the CTC
        sum over all its alignments + alpha x ln P_LM of its words (from <s>, without </s>) + beta per word. A
        transcript counts twice, with and without the space after its last word, as DeepSpeech keeps both
        prefixes (and returns the trailing space when that one wins)."""
        ranked = sorted(results, key=lambda result: -result.score)
        candidates = list(dict.fromkeys(tuple(w for w in r.words if w >= 0) for r in ranked))[:RERANKED]
        sequences, scores = [], []
        for words in candidates:
            labels = [label for word in words for label in self.scorer.spellings[word]]
            ends = [labels] if self.scorer.utf8_mode or not labels else [labels[:-1], labels]
            sequences += ends
            scores += [self.lm_score(words)] * len(ends)
        if not sequences:
            return ''
        scores = np.array(scores) + ctc_log_likelihoods(log_probs, sequences, self.blank)
        return self.alphabet.Decode(sequences[int(np.argmax(scores))])

    def lm_score(self, words):
        """alpha x ln P(words) from the sentence start, without its end, + beta per word (DeepSpeech's)."""
        lm, state, log10_prob = self.scorer.lm, self.scorer.lm.start(False), 0.0
        for word in words:
            state, score = lm.score(state, word)
            log10_prob += score
        return self.lm_weight * log10_prob + self.scorer.beta * len(words)

    def collapse(self, tokens):
        """CTC's rule on a per-frame token path: merge repeats, then drop blanks."""
        labels, previous = [], None
        for token in tokens:
            if token != previous and token != self.blank:
                labels.append(token)
            previous = token
        return labels


def ctc_log_likelihoods(log_probs, sequences, blank):
    """ln P(sequence | log_probs [time, classes]) under CTC, summed over every alignment, for each label
    sequence, all at once. (CTC's forward recursion in numpy, in probabilities rescaled every frame:
    TensorFlow's ctc_loss would bring TensorFlow into the decoding workers.)"""
    longest = max(len(sequence) for sequence in sequences)
    states = np.full((len(sequences), 2 * longest + 1), blank)      # blank, label, blank, label, ..., blank
    for row, sequence in enumerate(sequences):
        states[row, 1:2 * len(sequence):2] = sequence
    can_skip = np.zeros(states.shape, bool)                          # from the label two states back
    can_skip[:, 2:] = (states[:, 2:] != blank) & (states[:, 2:] != states[:, :-2])
    probs = np.exp(log_probs.astype(np.float64))
    forward = np.zeros(states.shape)
    forward[:, :2] = probs[0][states[:, :2]]
    log_scale = np.zeros(len(sequences))
    for frame in probs[1:]:
        reached = forward.copy()
        reached[:, 1:] += forward[:, :-1]
        reached[:, 2:] += np.where(can_skip[:, 2:], forward[:, :-2], 0.0)
        forward = reached * frame[states]
        scale = forward.max(axis=1, keepdims=True)
        scale[scale == 0] = 1.0
        forward /= scale
        log_scale += np.log(scale[:, 0])
    last = np.array([2 * len(sequence) for sequence in sequences])
    rows = np.arange(len(sequences))
    total = forward[rows, last] + np.where(last > 0, forward[rows, np.maximum(last - 1, 0)], 0.0)
    with np.errstate(divide='ignore'):
        return np.log(total) + log_scale


class BeamSearchPool:
    """decode_batch(list of probs) -> transcripts, on `processes` worker processes, each with its own copy of
    `search` (spawned, not forked: the parent runs TensorFlow's threads; each loads the scorer once)."""

    def __init__(self, search, processes):
        self.pool = multiprocessing.get_context('spawn').Pool(processes, _start_worker, (search,))

    def decode_batch(self, batch, lm_weights=None):
        return self.pool.map(_decode_in_worker, [(probs, lm_weights) for probs in batch], chunksize=1)

    def close(self):
        self.pool.terminate()


def _start_worker(search):
    global _worker_search
    _worker_search = search


def _decode_in_worker(task):
    """One utterance, with the parent's current alpha and beta (lm_optimizer changes them between trials)."""
    global _worker_search
    probs, weights = task
    if weights and weights != (_worker_search.scorer.alpha, _worker_search.scorer.beta):
        _worker_search = _worker_search.with_lm_weights(*weights)
    return _worker_search.decode(probs)
