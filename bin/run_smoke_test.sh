#!/usr/bin/env bash
# The main job on the bundled data: set up if needed (bin/setup.sh: what training and decoding need; no
# Horovod, KenLM tools or test infrastructure), train a small model on data/smoke_test/, then
# test it, printing the decoded transcripts and WER/CER. Extra arguments go to DeepSpeech.py, e.g.
# bin/run_smoke_test.sh --epochs 50. Checkpoints and summaries go under ${SMOKE_DIR:-/tmp/deepspeech_smoke}.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$("$ROOT/bin/setup.sh" | tail -n 1)"
OUT="${SMOKE_DIR:-/tmp/deepspeech_smoke}"
cd "$ROOT"
exec "$PY" DeepSpeech.py \
    --train_files data/smoke_test/smoke_test.csv \
    --dev_files data/smoke_test/smoke_test.csv \
    --test_files data/smoke_test/smoke_test.csv \
    --alphabet_config_path data/alphabet.txt \
    --n_hidden 100 --epochs 150 --learning_rate 0.001 --dropout_rate 0 \
    --train_batch_size 1 --dev_batch_size 3 --test_batch_size 3 \
    --load_train init --checkpoint_dir "$OUT/checkpoints" --summary_dir "$OUT/summaries" \
    --test_output_file "$OUT/test_output.json" --noshow_progressbar \
    "$@"
