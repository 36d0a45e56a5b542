"""The shell blocks of README.rst and doc/*.rst marked runnable run as written (doc/TESTING.rst,
"Runnable documentation"), so the commands a newcomer copies stay true.

A marker is an rst comment before the paragraph that introduces the literal block:
``.. runnable``, ``.. runnable slow`` (its own test, marked slow), optionally followed by
``with --flag value ...``: those flags' values replace the block's own (the flags must be in the
block), so a 30-epoch example runs in seconds and the marker says so where the command stands."""
import glob
import os
import random
import re
import shlex
import shutil
import sys

import pytest

from tests.helpers.suite import ROOT, SMOKE_DIR, run_command

MARKER = re.compile(r'^\.\. runnable(?P<slow> slow)?(?: with (?P<flags>.+))?\s*$')
DOCS = ['README.rst'] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'doc', '*.rst')))


class Block:
    def __init__(self, path, line, slow, flags, text):
        self.path, self.line, self.slow, self.flags, self.text = path, line, slow, flags, text

    def __repr__(self):
        return '{}:{}'.format(self.path, self.line)

    def script(self):
        """The block with the marker's flag values in place of its own."""
        text = self.text
        for flag, value in self.flags:
            text, count = re.subn(r'{}(?:=|\s+)\S+'.format(re.escape(flag)), '{} {}'.format(flag, value), text)
            assert count, '{}: the marker sets {}, which the block does not have'.format(self, flag)
        return text


def runnable_blocks(path):
    """The marked literal blocks of one rst file, in order."""
    with open(os.path.join(ROOT, path), encoding='utf-8') as rst:
        lines = rst.read().splitlines()
    blocks = []
    for number, line in enumerate(lines):
        marker = MARKER.match(line)
        if not marker:
            continue
        words = shlex.split(marker.group('flags') or '')
        flags = list(zip(words[::2], words[1::2]))
        intro = next((i for i in range(number + 1, len(lines)) if lines[i].rstrip().endswith('::')), None)
        assert intro is not None and '' not in [t.strip() for t in lines[number + 2:intro + 1]], \
            '{}:{}: a runnable marker must come right before the paragraph ending in "::"'.format(path, number + 1)
        body = []
        for text in lines[intro + 1:]:
            if text.strip() and not text.startswith(' '):
                break
            body.append(text)
        code = '\n'.join(body).strip('\n')
        indent = min(len(t) - len(t.lstrip()) for t in code.splitlines() if t.strip())
        code = '\n'.join(t[indent:] for t in code.splitlines())
        blocks.append(Block(path, number + 1, bool(marker.group('slow')), flags, code))
    return blocks


def make_sandbox(root):
    """A working directory that is the checkout (its files linked) plus what the docs call `my/`: the
    bundled speech as train, dev and test CSVs, and `my_text.txt`, a text to build a language model of."""
    for name in os.listdir(ROOT):
        if name not in ('.git', 'my', 'my_lm', 'my_text.txt'):
            os.symlink(os.path.join(ROOT, name), os.path.join(root, name))
    my = os.path.join(root, 'my')
    os.mkdir(my)
    for name in os.listdir(SMOKE_DIR):
        if name.endswith('.wav'):
            shutil.copy(os.path.join(SMOKE_DIR, name), my)
    with open(os.path.join(SMOKE_DIR, 'smoke_test.csv')) as csv:
        rows = csv.read()
    for kind in ('train', 'dev', 'test'):
        with open(os.path.join(my, kind + '.csv'), 'w') as out:
            out.write(rows)
    # Words drawn by a Zipf law, as in real text: KenLM's discounts need n-grams seen once, twice, ...
    rng = random.Random(0)
    words = ['good', 'morning', 'hello', 'world', 'the', 'cat', 'sat'] + [
        ''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rng.randint(2, 8))) for _ in range(400)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    with open(os.path.join(root, 'my_text.txt'), 'w') as text:
        for _ in range(2000):
            text.write(' '.join(rng.choices(words, weights, k=rng.randint(3, 12))) + '\n')


def run_blocks(blocks, tmp_path):
    sandbox = str(tmp_path)
    make_sandbox(sandbox)
    # $PY as the blocks' own `PY=$(bin/setup.sh | tail -n 1)` gives it (bin/run_tests.sh runs the suite in it)
    env = {'PY': sys.executable, 'SMOKE_DIR': os.path.join(sandbox, 'smoke')}
    for block in blocks:
        run = run_command(['bash', '-euo', 'pipefail', '-c', block.script()], cwd=sandbox, env=env,
                          check=False, timeout=600)
        # Every line naming an error first: under horovodrun the rank that failed first may be far from the tail.
        errors = [line for line in run.output.splitlines() if 'Error' in line or ' E ' in line[:12]]
        assert run.returncode == 0, '{} failed ({}):\n{}\n{}\n...\n{}'.format(
            block, run.returncode, block.script(), '\n'.join(errors[:30]), run.output[-4000:])


ALL_BLOCKS = [block for path in DOCS for block in runnable_blocks(path)]


def test_markers_name_blocks_and_flags_they_have():
    """Every marker stands before a literal block, and the flags it replaces are the block's own."""
    assert len(ALL_BLOCKS) >= 5
    for block in ALL_BLOCKS:
        assert block.text.strip(), block
        block.script()


@pytest.mark.slow
@pytest.mark.parametrize('path', sorted({b.path for b in ALL_BLOCKS if not b.slow}))
def test_runnable_blocks_run(path, tmp_path):
    run_blocks([b for b in ALL_BLOCKS if b.path == path and not b.slow], tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize('block', [b for b in ALL_BLOCKS if b.slow], ids=repr)
def test_slow_runnable_block_runs(block, tmp_path):
    run_blocks([block], tmp_path)
