#!/usr/bin/env python3
"""The characters of the transcripts of DeepSpeech CSVs, with counts and where the rare ones are
(DeepSpeech 0.9's tool of this name): the way to an alphabet for another language.

    python bin/check_characters.py -csv train.csv,dev.csv,test.csv            # counts, rare rows
    python bin/check_characters.py -csv train.csv,dev.csv -alpha > alphabet.txt

Rare characters (at most --rare_count uses) are often typos, foreign words or punctuation an importer
should have removed: their rows are listed so they can be fixed before they become labels. With -alpha
the output is an alphabet file (--alphabet_config_path) of every character, in order of frequency.
"""
import argparse
import csv
import sys
import unicodedata
from collections import Counter, defaultdict

ALPHABET_HEADER = ('# Each line in this file represents the Unicode codepoint (UTF-8 encoded)\n'
                   '# associated with a numeric label.\n'
                   '# A line that starts with # is a comment. You can escape it with \\# if you wish\n'
                   '# to use \'#\' as a label.\n')


def count_characters(csv_paths, normalize):
    """(Counter of characters, {character: [(csv, line)]}) over the transcripts of `csv_paths`."""
    counts, where = Counter(), defaultdict(list)
    for path in csv_paths:
        with open(path, encoding='utf-8-sig', newline='') as csv_file:
            reader = csv.DictReader(csv_file)
            if 'transcript' not in (reader.fieldnames or []):
                raise SystemExit('{}: no transcript column (a DeepSpeech CSV starts with '
                                 'wav_filename,wav_filesize,transcript)'.format(path))
            for row in reader:
                text = row['transcript']
                if normalize:
                    text = unicodedata.normalize('NFKC', text)
                for character in text:
                    counts[character] += 1
                    where[character].append((path, reader.line_num))
    return counts, where


def describe(character):
    return '{!r} U+{:04X} {}'.format(character, ord(character), unicodedata.name(character, '(unnamed)'))


def alphabet_line(character):
    return '\\#' if character == '#' else character


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('-csv', '--csv-files', required=True, help='comma-separated DeepSpeech CSV files')
    parser.add_argument('-alpha', '--alphabet-format', action='store_true',
                        help='print an alphabet file of the characters instead of the report')
    parser.add_argument('-unicode', '--disable-unicode-variants', action='store_true',
                        help='keep Unicode variants apart (default: NFKC-normalise, e.g. a ligature is its letters)')
    parser.add_argument('--rare_count', type=int, default=3, help='characters used at most this often are rare')
    parser.add_argument('--rows', type=int, default=5, help='rows listed per rare character')
    args = parser.parse_args(argv)
    counts, where = count_characters([p for p in args.csv_files.split(',') if p], not args.disable_unicode_variants)
    ordered = sorted(counts, key=lambda c: (-counts[c], c))
    if args.alphabet_format:
        sys.stdout.write(ALPHABET_HEADER + ''.join(alphabet_line(c) + '\n' for c in ordered) + '# The last (non-comment) '
                         'line needs to end with a newline.\n')
        return 0
    print('{} characters in {} uses:'.format(len(counts), sum(counts.values())))
    for character in ordered:
        print('  {:>9}  {}'.format(counts[character], describe(character)))
    rare = [c for c in ordered if counts[c] <= args.rare_count]
    if rare:
        print('rare characters (at most {} uses), where they are:'.format(args.rare_count))
        for character in rare:
            rows = ', '.join('{} line {}'.format(path, line) for path, line in where[character][:args.rows])
            print('  {}: {}'.format(describe(character), rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
