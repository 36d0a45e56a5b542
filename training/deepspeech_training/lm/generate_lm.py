"""Build a KenLM language model and its vocabulary for a DeepSpeech scorer (see doc/LM.rst).

text corpus (--input_txt, plain or .gz, one sentence a line) -> lower-cased -> lmplz (ARPA, --arpa_order,
--max_arpa_memory, --arpa_prune, --discount_fallback) -> ARPA filtered to the --top_k most frequent
words -> build_binary (--binary_type, --binary_a_bits, --binary_q_bits) -> OUTPUT_DIR/lm.binary and
OUTPUT_DIR/vocab-TOP_K.txt, the two inputs of bin/generate_scorer_package.py.

The same flags as DeepSpeech 0.9's data/lm/generate_lm.py, with the values its documentation used as
defaults. The lower-cased text is streamed into lmplz instead of going through a temporary file.
The KenLM tools come from bin/build_kenlm.sh, which bin/setup.sh --kenlm runs.
"""
import argparse
import collections
import gzip
import os
import signal
import subprocess
import sys
import tempfile

KENLM_TOOLS = ('lmplz', 'filter', 'build_binary')
# KenLM's default KENLM_MAX_ORDER, which bin/build_kenlm.sh and flashlight-text's KenLM are built with
# (a 6-gram package loads in both; DeepSpeech 0.9's decoder has the same limit).
MAX_ORDER = 6


class LMError(Exception):
    """Building the LM failed; the message names the file or command and what to do."""


class ToolError(LMError):
    """A KenLM tool failed; the message has its command line and what it printed."""

    def __init__(self, command, returncode, stderr):
        tail = '\n'.join(stderr.decode('utf-8', 'replace').strip().splitlines()[-15:])
        # KenLM tools abort (SIGABRT) on their exceptions; say so rather than print "-6".
        how = ('was killed by {}'.format(signal.Signals(-returncode).name) if returncode < 0
               else 'failed with exit code {}'.format(returncode))
        super().__init__('KenLM command {}:\n  {}\n{}'.format(how, ' '.join(command), tail))


def default_kenlm_bins():
    """The tools bin/build_kenlm.sh puts in the environment this script runs in, if built."""
    path = os.path.join(sys.prefix, 'kenlm', 'bin')
    return path if os.path.isdir(path) else None


def open_text(path):
    """The corpus as text lines, read through gzip when it ends in .gz (as DeepSpeech did)."""
    if path.endswith('.gz'):
        return gzip.open(path, 'rt', encoding='utf-8')
    return open(path, encoding='utf-8')


def tool(args, name):
    """Path of one KenLM tool."""
    return os.path.join(args.kenlm_bins, name)


def run_tool(command, stdin_bytes=None):
    """Run a KenLM tool, keeping its chatter unless it fails."""
    process = subprocess.run(command, input=stdin_bytes, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if process.returncode != 0:
        raise ToolError(command, process.returncode, process.stderr)


def count_and_build_arpa(args, arpa_path):
    """Stream the lower-cased corpus into lmplz while counting its words; returns the counts.

    One pass over the corpus, and no lower-cased copy of it on disk."""
    # The trailing separator puts lmplz's temporary files inside output_dir, not beside it.
    command = [tool(args, 'lmplz'), '--order', str(args.arpa_order),
               '--temp_prefix', os.path.join(args.output_dir, ''), '--memory', args.max_arpa_memory,
               '--arpa', arpa_path, '--prune', *args.arpa_prune.split('|')]
    if args.discount_fallback:
        command.append('--discount_fallback')
    counter = collections.Counter()
    with tempfile.TemporaryFile() as stderr:
        lmplz = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            with open_text(args.input_txt) as corpus:
                for line in corpus:
                    line = line.lower()
                    counter.update(line.split())
                    lmplz.stdin.write(line.encode('utf-8'))
        except BrokenPipeError:
            pass  # lmplz stopped early: its exit code and message say why
        except UnicodeDecodeError as error:
            lmplz.kill()
            raise LMError('{} is not UTF-8 text ({}); re-encode it as UTF-8'.format(args.input_txt, error))
        finally:
            try:
                lmplz.stdin.close()
            except BrokenPipeError:
                pass
        if lmplz.wait() != 0:
            stderr.seek(0)
            raise ToolError(command, lmplz.returncode, stderr.read())
    return counter


def write_vocabulary(args, counter):
    """Save the top-k words, print DeepSpeech's statistics, and return the words."""
    top = counter.most_common(args.top_k)
    words = [word for word, _ in top]
    vocab_path = os.path.join(args.output_dir, 'vocab-{}.txt'.format(args.top_k))
    with open(vocab_path, 'w', encoding='utf-8') as vocab_file:
        vocab_file.write('\n'.join(words) + '\n')
    total = sum(counter.values())
    print('  Your text file has {} words in total'.format(total))
    print('  It has {} unique words'.format(len(counter)))
    print('  Your top-{} words are {:.4f} percent of all words'.format(
        args.top_k, 100.0 * sum(count for _, count in top) / total))
    print('  Your most common word "{}" occurred {} times'.format(*top[0]))
    print('  The least common word in your top-k is "{}" with {} times'.format(*top[-1]))
    print('Saved the vocabulary to {}'.format(vocab_path))
    return words


def build_binary(args, arpa_path, binary_path):
    """Quantised (trie) or plain (probing) KenLM binary without its vocabulary strings (-v), which
    a scorer package needs: the dictionary is appended right after the model."""
    command = [tool(args, 'build_binary')]
    if args.binary_type == 'trie':
        # build_binary refuses quantisation for probing (DeepSpeech 0.9 passed -a/-q anyway and failed).
        command += ['-a', str(args.binary_a_bits), '-q', str(args.binary_q_bits)]
    run_tool(command + ['-v', args.binary_type, arpa_path, binary_path])


def generate(args):
    """Corpus -> lm.binary and vocab-<top_k>.txt in args.output_dir."""
    arpa_path = os.path.join(args.output_dir, 'lm.arpa')
    filtered_path = os.path.join(args.output_dir, 'lm_filtered.arpa')
    binary_path = os.path.join(args.output_dir, 'lm.binary')
    try:
        print('Lower-casing {}, counting words and creating the ARPA file ...'.format(args.input_txt))
        counter = count_and_build_arpa(args, arpa_path)
        if not counter:
            raise LMError('{} has no words'.format(args.input_txt))
        print('Saving the top {} words ...'.format(args.top_k))
        words = write_vocabulary(args, counter)
        print('Filtering the ARPA file to the vocabulary ...')
        run_tool([tool(args, 'filter'), 'single', 'model:' + arpa_path, filtered_path],
                 stdin_bytes='\n'.join(words).encode('utf-8'))
        print('Building {} ...'.format(binary_path))
        build_binary(args, filtered_path, binary_path)
    finally:
        for path in (arpa_path, filtered_path):
            if os.path.exists(path):
                os.remove(path)


def check_args(parser, args):
    """Fail early, naming the file and the fix, instead of deep inside a KenLM tool."""
    if args.kenlm_bins is None:
        parser.error('the KenLM tools are not built: run bin/setup.sh --kenlm (the Debian packages they need, '
                     'then bin/build_kenlm.sh into this environment), or pass --kenlm_bins DIR holding {}'
                     .format(', '.join(KENLM_TOOLS)))
    missing = [name for name in KENLM_TOOLS if not os.access(tool(args, name), os.X_OK)]
    if missing:
        parser.error('{} not found in --kenlm_bins {}: run bin/build_kenlm.sh, which prints the folder '
                     'to pass (bin/setup.sh --kenlm also installs the Debian packages it needs)'
                     .format(', '.join(missing), args.kenlm_bins))
    if not os.path.isfile(args.input_txt):
        parser.error('--input_txt {} does not exist'.format(args.input_txt))
    if not os.path.isdir(args.output_dir):
        parser.error('--output_dir {} is not a directory: create it first'.format(args.output_dir))
    if not 1 <= args.arpa_order <= MAX_ORDER:
        parser.error('--arpa_order must be 1 to {} (KenLM and the decoder are built for at most {})'
                     .format(MAX_ORDER, MAX_ORDER))
    if args.top_k < 1:
        parser.error('--top_k must be at least 1')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Generate lm.binary and top-k vocab for DeepSpeech '
                                                 '(see doc/LM.rst).')
    parser.add_argument('--input_txt', '-i', required=True,
                        help='Path to a file.txt or file.txt.gz with sample sentences, one per line')
    parser.add_argument('--output_dir', '-o', required=True, help='Directory path for the output')
    parser.add_argument('--top_k', '-k', type=int, default=500000,
                        help='Use top_k most frequent words for the vocab.txt file. These will be used to '
                             'filter the ARPA file (default: %(default)s)')
    parser.add_argument('--kenlm_bins', default=default_kenlm_bins(),
                        help='File path to the KenLM binaries lmplz, filter and build_binary (default: the '
                             "ones bin/build_kenlm.sh built into this Python's environment: %(default)s)")
    parser.add_argument('--arpa_order', type=int, default=5,
                        help='Order of k-grams in ARPA-file generation (default: %(default)s)')
    parser.add_argument('--max_arpa_memory', default='85%',
                        help='Maximum allowed memory usage for ARPA-file generation, as lmplz --memory: '
                             'a percentage of physical memory or a size like 2G (default: %(default)s)')
    parser.add_argument('--arpa_prune', default='0|0|1',
                        help="ARPA pruning parameters, one count threshold per order, separated with '|' "
                             '(default: %(default)s)')
    parser.add_argument('--binary_a_bits', type=int, default=255,
                        help='Build binary quantization value a in bits (trie only; default: %(default)s)')
    parser.add_argument('--binary_q_bits', type=int, default=8,
                        help='Build binary quantization value q in bits (trie only; default: %(default)s)')
    parser.add_argument('--binary_type', choices=('trie', 'probing'), default='trie',
                        help='Build binary data structure type (default: %(default)s)')
    parser.add_argument('--discount_fallback', action='store_true',
                        help="To try when such message is returned by kenlm: 'Could not calculate "
                             "Kneser-Ney discounts [...] rerun with --discount_fallback' (small corpora)")
    args = parser.parse_args(argv)
    check_args(parser, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        generate(args)
    except LMError as error:
        print('ERROR: {}'.format(error), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
