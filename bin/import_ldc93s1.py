#!/usr/bin/env python3
"""Import LDC93S1, the one-sentence TIMIT sample DeepSpeech's smoke tests train on: DeepSpeech 0.9's
bin/import_ldc93s1.py, same argument and output.

    $PY bin/import_ldc93s1.py DATA_DIR

Downloads LDC93S1.wav and LDC93S1.txt from https://catalog.ldc.upenn.edu/desc/addenda/ into DATA_DIR,
each only if it is not already there, and writes DATA_DIR/ldc93s1.csv (wav_filename with its absolute path,
wav_filesize, transcript: the .txt's words after its two sample numbers, lower case, without '.').
Offline, put the two files into DATA_DIR first (from a machine that can reach the site); the download
error says so. LDC93S1_BASE_URL in the environment replaces the site (a mirror).
"""
import csv
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data.samples import CSV_COLUMNS  # noqa: E402

LDC93S1_BASE = 'LDC93S1'
LDC93S1_BASE_URL = 'https://catalog.ldc.upenn.edu/desc/addenda/'
TIMEOUT = 60


class DownloadError(Exception):
    pass


def maybe_download(filename, data_dir, url):
    """DATA_DIR/filename, downloaded from `url` if it is not there yet (written whole or not at all)."""
    path = os.path.join(data_dir, filename)
    if os.path.exists(path):
        return path
    os.makedirs(data_dir, exist_ok=True)
    print('Downloading {} to {}'.format(url, path), flush=True)
    partial = path + '.part'
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(partial, 'wb') as out:
            while True:
                chunk = response.read(1 << 16)
                if not chunk:
                    break
                out.write(chunk)
    except (urllib.error.URLError, OSError) as error:
        if os.path.exists(partial):
            os.remove(partial)
        reason = getattr(error, 'reason', error)
        raise DownloadError('cannot download {}: {}. Without network access to that site: fetch {} and {} from {} '
                            'on a machine that has it, put them into {} and run this again (files already there '
                            'are not downloaded).'.format(url, reason, LDC93S1_BASE + '.wav', LDC93S1_BASE + '.txt',
                                                          url.rsplit('/', 1)[0] + '/', os.path.abspath(data_dir)))
    os.replace(partial, path)
    print('Downloaded {} ({} bytes)'.format(path, os.path.getsize(path)), flush=True)
    return path


def _download_and_preprocess_data(data_dir):
    base_url = os.environ.get('LDC93S1_BASE_URL', LDC93S1_BASE_URL)
    base_url = base_url if base_url.endswith('/') else base_url + '/'
    local_file = maybe_download(LDC93S1_BASE + '.wav', data_dir, base_url + LDC93S1_BASE + '.wav')
    trans_file = maybe_download(LDC93S1_BASE + '.txt', data_dir, base_url + LDC93S1_BASE + '.txt')
    with open(trans_file, 'r') as fin:
        # "0 46797 She had your dark suit in greasy wash water all year." -> the words, lower case, no '.'
        transcript = ' '.join(fin.read().strip().lower().split(' ')[2:]).replace('.', '')
    csv_path = os.path.join(data_dir, 'ldc93s1.csv')
    with open(csv_path, 'w', newline='') as out:
        writer = csv.writer(out, lineterminator='\n')
        writer.writerow(CSV_COLUMNS)
        writer.writerow([os.path.abspath(local_file), os.path.getsize(local_file), transcript])
    return csv_path


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ('-h', '--help'):
        print('usage: import_ldc93s1.py DATA_DIR\n\n' + __doc__.strip().split('\n\n', 1)[1], file=sys.stderr)
        return 0 if argv and argv[0] in ('-h', '--help') else 2
    try:
        csv_path = _download_and_preprocess_data(argv[0])
    except DownloadError as error:
        print('Error: {}'.format(error), file=sys.stderr)
        return 1
    print('Wrote {}'.format(csv_path))
    return 0


if __name__ == '__main__':
    sys.exit(main())
