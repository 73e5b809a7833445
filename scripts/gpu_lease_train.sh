#!/bin/bash
# One GPU lease (a machine lent for minutes, reached through a copy of the working tree of at most 64 MiB, that
# gives back at most 8 files of 16 MiB): continue a shipped model (MODEL=en, the default, or zh) on its large
# corpus at 1,024 rows a step, stop by wall time (SIGTERM: the trainer checkpoints), bring back the best validated checkpoint exported (softmax float32 split
# into parts under 16 MiB) with its state.json and the run's log.jsonl, for
# `scripts/make_models.py --ship-from DIR --corpus ...` after `cat softmax.part-* > softmax.safetensors`
# (docs/training.md, "Training on a lent GPU"). It reads, in .gpu/ (git-ignored, carried):
#   xz -T2 -6 -c en-large/train.txt > .gpu/train.txt.xz; cp en-large/valid.txt en-large/test.txt .gpu/
# (en-large's xz: 26.3 MB; zh-large's: 17.4 MB). Both models and a corpus are over the 64 MiB a call carries:
# take the other model out of the git index for the call (git rm -r --cached src/elmo/models/zh, its path in
# .git/info/exclude; git reset and the line removed afterwards).
# RESUME=1 (same MODEL and STEPS, the machine still warm): continues the run the first call stopped, then exports.
# Try it here on CPU: DEV_TRY=1 TRAIN_SECONDS=170 ROWS=64 STEPS=12 EVERY=5 OUT=/tmp/gpu-try PY=.venv/bin/python \
#   scripts/gpu_lease_train.sh
mkdir -p /tmp/meta/elmo-0.1.0.dist-info && printf 'Metadata-Version: 2.1\nName: elmo\nVersion: 0.1.0\n' \
  > /tmp/meta/elmo-0.1.0.dist-info/METADATA
export PYTHONPATH=$PWD/src:/tmp/meta PYTHONUNBUFFERED=1
PY=${PY:-python3}; OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
TRAIN_SECONDS=${TRAIN_SECONDS:-470}; ROWS=${ROWS:-1024}; STEPS=${STEPS:-2400}; EVERY=${EVERY:-200}
MODEL=${MODEL:-en}; LR=${LR:-1.5e-3}
# How users' text is split (tokenizer.json), and the new words' count that adds none (en: one) to the shipped
# vocabulary (both were built from these corpora with --min-count 6; en-large's tokens changed a little since).
case $MODEL in en) EXPORT_TOKENIZER=english; MIN_COUNT=10;; zh) EXPORT_TOKENIZER=jieba; MIN_COUNT=6;; esac
C=/tmp/corpus; RUN=/tmp/run-$MODEL-gpu; mkdir -p $C; rm -rf /tmp/model
[ -n "$RESUME" ] || rm -rf $RUN
section() { echo; echo "=== $1 ($(date +%T))"; }
section machine
nvidia-smi --query-gpu=name,memory.total --format=csv 2>&1; nproc
$PY -c "import torch; print(torch.__version__, torch.cuda.is_available())"
if [ -z "$RESUME" ]; then
  $PY -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.gpu/train.txt.xz'), open('$C/train.txt', 'wb'))"
  cp .gpu/valid.txt .gpu/test.txt $C/
fi
wc -lc $C/*.txt
if [ -z "$DEV_TRY$RESUME" ]; then  # the char CNN's CUDA path against float64 Conv1d, beside the run (tiny)
  (timeout 120 $PY -m pytest -p no:cacheprovider -q tests/test_char_cnn.py > $OUT/char_cnn_tests.txt 2>&1 &)
fi
section train
if [ -n "$RESUME" ]; then  # a second call on the still-warm machine: the same run, on to STEPS
  timeout -s TERM $TRAIN_SECONDS $PY -m elmo.training train --resume $RUN --max-steps $STEPS --quiet 2>&1 | tail -40
  rc=${PIPESTATUS[0]}
else
timeout -s TERM $TRAIN_SECONDS $PY -m elmo.training train --init-from $MODEL --corpus $C/train.txt \
  --tokenizer whitespace --valid $C/valid.txt --min-count $MIN_COUNT --out $RUN --batch-size $ROWS \
  --unroll-steps 20 --optimizer adam --lr $LR --lr-decay-steps $STEPS --max-steps $STEPS --negatives 4096 --state-reset 0.1 \
  --dropout 0.1 --checkpoint-every $EVERY --valid-every $EVERY --valid-batch-size 256 --keep-checkpoints 30 \
  --log-every 20 --quiet 2>&1 | tail -40
rc=${PIPESTATUS[0]}
fi
echo "train rc $rc"
section choose
BEST=$($PY - $RUN <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
records = []
for line in (run / "log.jsonl").read_text().splitlines():
    try:
        records.append(json.loads(line))
    except ValueError:
        break
kept = {int(p.name[5:]): p for p in (run / "checkpoints").glob("step-*") if (p / "state.json").is_file()}
valid = {r["step"]: r["valid_perplexity"] for r in records if "valid_perplexity" in r and r["step"] in kept}
for step, value in sorted(valid.items()):
    print(f"step {step}: valid {value:.2f}", file=sys.stderr)
rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
if rates:
    print(f"tokens/s: median {sorted(rates)[len(rates) // 2]:,.0f} over {len(rates)} records", file=sys.stderr)
print(kept[min(valid, key=valid.get)] if valid else kept[max(kept)])
PY
)
echo "best: $BEST"
section export
$PY -m elmo.training export "$BEST" --out /tmp/model --tokenizer $EXPORT_TOKENIZER 2>&1 | tail -3
ls -la /tmp/model
cp /tmp/model/weights.hdf5 $OUT/
split -b 15M -d /tmp/model/softmax.safetensors $OUT/softmax.part-
(cd /tmp/model && sha256sum softmax.safetensors > softmax.sha256)
cp "$BEST/state.json" $RUN/log.jsonl /tmp/model/
tar -C /tmp/model -cf $OUT/small.tar options.json vocab.txt tokenizer.json softmax.sha256 state.json log.jsonl
ls -la $OUT; cat $OUT/char_cnn_tests.txt 2>/dev/null | tail -3
