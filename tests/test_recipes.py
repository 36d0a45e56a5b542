"""The shipped recipes (data/recipes/*.flags, absl flagfiles): each says what it is for, parses, and trains
one tiny epoch with the flags a user puts after it, in one process and on two Horovod ranks."""
import glob
import os

import pytest

from tests.helpers.suite import ROOT, SMOKE_CSV, run_deepspeech, run_horovod, tiny_model_flags

RECIPES = sorted(glob.glob(os.path.join(ROOT, 'data', 'recipes', '*.flags')))


def recipe_lines(recipe):
    with open(recipe) as flagfile:
        lines = [line.strip() for line in flagfile]
    return [line for line in lines if line.startswith('#')], [line for line in lines if line.startswith('--')]


def test_the_recipes_are_shipped():
    assert 'small-corpus.flags' in [os.path.basename(recipe) for recipe in RECIPES]


@pytest.mark.parametrize('recipe', RECIPES, ids=os.path.basename)
def test_recipe_says_what_it_is_for_and_holds_only_flags(recipe):
    comments, flags = recipe_lines(recipe)
    header = ' '.join(comments)
    assert 'For ' in header and 'Measured' in header and flags
    with open(recipe) as flagfile:
        assert all(not line.strip() or line.strip() in comments + flags for line in flagfile)


@pytest.mark.slow
@pytest.mark.parametrize('recipe', RECIPES, ids=os.path.basename)
def test_recipe_trains_one_tiny_epoch_with_the_users_flags_after_it(recipe, tmp_path):
    run = run_deepspeech('--flagfile', recipe, *tiny_model_flags(tmp_path, 16), '--train_files', SMOKE_CSV,
                         '--dev_files', SMOKE_CSV, '--epochs', 1)
    assert 'Finished training epoch 0' in run.output and 'Finished validating epoch 0 on' in run.output
    used = (tmp_path / 'checkpoints' / 'flags.txt').read_text().splitlines()
    assert '--n_hidden=16' in used and '--dropout_rate=0.0' in used     # the user's flags after the recipe win
    overridden = ('--n_hidden=', '--dropout_rate=', '--epochs=')
    assert set(line for line in recipe_lines(recipe)[1] if not line.startswith(overridden)) <= set(used)


@pytest.mark.slow
@pytest.mark.parametrize('recipe', RECIPES, ids=os.path.basename)
def test_recipe_trains_on_two_horovod_ranks_in_step(recipe, tmp_path):
    """The ranks check at each epoch start that they agree on epoch, step and learning rate (a
    divergence fails the run). The batch is one process's, so the user sets one per rank (three samples)."""
    run = run_horovod(2, '--flagfile', recipe, *tiny_model_flags(tmp_path, 16), '--train_files', SMOKE_CSV,
                      '--train_batch_size', 1, '--epochs', 2)
    assert 'Finished training epoch 1' in run.output
