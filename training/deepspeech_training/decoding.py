"""CTC decoding as the settings ask: DeepSpeech's beam search with the KenLM scorer, without it, or the
greedy best path; built in one place (`make_decoder`) for training's test, evaluate.py, transcribe.py and
lm_optimizer.py."""
import os
import time

import numpy as np

from .beam_search import BeamSearch, BeamSearchPool
from .scorer import load_scorer
from .util.text import labels_to_text


# Beam search moves to a process per core once a batch took this long in this process.
POOL_AFTER_SECONDS = 2.0
PROCESSES = os.cpu_count() or 1


def greedy_decode(probs, alphabet):
    """Best path: argmax per frame, merge repeats, drop the blank (the last class).
    Written here because it is three lines; beam search goes through flashlight-text (beam_search.py)."""
    best = np.argmax(probs, axis=1)
    blank = probs.shape[1] - 1
    keep = [label for i, label in enumerate(best) if label != blank and (i == 0 or label != best[i - 1])]
    return labels_to_text(alphabet, keep)


class Decoder:
    """CTC decoding as `settings` (DecodingSettings) ask: DeepSpeech's beam search (with the KenLM
    scorer if given), or the greedy best path with beam width 1 and no scorer."""

    def __init__(self, alphabet, settings, scorer=None):
        self.alphabet, self.settings, self.scorer = alphabet, settings, scorer
        self.beam_search, self.pool = None, None
        if settings.beam_width > 1 or scorer is not None:
            self.beam_search = BeamSearch(alphabet, settings.beam_width, settings.cutoff_prob, settings.cutoff_top_n,
                                          scorer)

    def set_lm_weights(self, alpha, beta):
        """Decode with the scorer's alpha and beta set to these (lm_optimizer's trials)."""
        self.beam_search = self.beam_search.with_lm_weights(alpha, beta)

    def decode(self, probs, lengths):
        """probs [batch, time, classes] (softmax), lengths [batch] -> one transcript per sample."""
        if self.beam_search is None:
            return [greedy_decode(p[:n], self.alphabet) for p, n in zip(probs, lengths)]
        batch = [p[:n] for p, n in zip(probs, lengths)]
        if self.pool:
            return self.pool.decode_batch(batch, self.scorer and (self.scorer.alpha, self.scorer.beta))
        started = time.time()
        texts = [self.beam_search.decode(p) for p in batch]
        if time.time() - started > POOL_AFTER_SECONDS and PROCESSES > 1:
            self.pool = BeamSearchPool(self.beam_search, PROCESSES)     # a few seconds to start: worth it from here
        return texts



def make_decoder(settings):
    """The Decoder `settings` (Settings) ask for; a bad scorer fails here, not after hours of training."""
    decoding, model = settings.decoding, settings.model
    scorer = (load_scorer(decoding.scorer_path, decoding.lm_alpha, decoding.lm_beta, model.alphabet_path,
                          model.bytes_output_mode) if decoding.scorer_path else None)
    return Decoder(model.alphabet, decoding, scorer)
