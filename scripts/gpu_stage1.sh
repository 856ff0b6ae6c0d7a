#!/usr/bin/env bash
# Issue 13's rule 55: stage 1 at GPU scale ("stage 1 L"), run on a lent GPU machine in one or
# more calls of at most ~10 minutes each, resuming from last.ckpt between calls.
#
#   scripts/gpu_stage1.sh                 # first call: throughput probe fixes the epoch count E,
#                                         # then trains until DEADLINE_S and leaves last.ckpt
#   E=NN scripts/gpu_stage1.sh            # later calls: resume with the same E until done
#
# The recipe is scripts/train_cv.sh pretrain with stage 1 W's continuation (from
# runs/cv-rms/pretrain/pkg, synthesis S + cortical_s0 1.0-1.8, AdamW lr 1e-3), except that an
# epoch is 448 fresh studies of 4 windows each (one study per batch of 4, so no DataLoader worker
# synthesises a study another worker also makes) from seed 50200000, on the GPU with 14 workers.
# On a machine with PyTorch and Lightning but without the project's other dependencies and no
# package index, DEPS names the folder scripts/gpu_deps.sh packs (SimpleITK, nilearn, nibabel and
# slicerio, unpacked into /tmp/site; the generator's lesion shapes and arterial atlas).
# The package, last.ckpt and the log go to $OUT when it is set, else to $RUNS/gpu-out.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE_S=${DEADLINE_S:-550}   # seconds after START at which training is stopped (last finished epoch kept)
RUNS=${RUNS:-runs/cv-rms-temporal-cortical-long}
WORKERS=${WORKERS:-14}
STUDIES=448
OUT=${OUT:-$RUNS/gpu-out}
mkdir -p "$OUT"
if [[ -n ${DEPS:-} ]]; then
    mkdir -p /tmp/site
    [[ -d /tmp/site/SimpleITK ]] || tar -xJf "$DEPS/sitk.tar.xz" -C /tmp/site
    [[ -d /tmp/site/nilearn ]] || tar -xJf "$DEPS/pydeps.tar.xz" -C /tmp/site
    export PYTHONPATH=/tmp/site:$PWD
    export LAMBDASEGMENT_LESYMAP=$PWD/$DEPS/lesymap-lesions LAMBDASEGMENT_ARTERIAL_ATLAS=$PWD/$DEPS/arterial-atlas/ArterialAtlas.nii.gz
fi
export PYTHON=${PYTHON:-python3} OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
S_W='{"in_plane_spacing_mm": [1.2, 2.0], "susceptibility_gain": [4.0, 16.0], "susceptibility_probability": 0.95, "susceptibility_extent_mm": [3.0, 8.0], "susceptibility_temporal_probability": 0.8, "cortical_s0": [1.0, 1.8]}'
"$PYTHON" -c "import torch, SimpleITK, nilearn; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"

if [[ -z ${E:-} ]]; then
    # The probe: studies per second of $WORKERS processes synthesising 3 studies each (seeds outside every stream used).
    rate=$("$PYTHON" - "$WORKERS" "$S_W" <<'EOF'
import json, sys, time
from multiprocessing import Pool
from LambdaSegmentLib.training import DEFAULT_PREPROCESSING  # train_cv.sh's preprocessing
from LambdaSegmentLib.training.prepared import prepare_synthetic
workers, ranges = int(sys.argv[1]), json.loads(sys.argv[2])
def make(seed: int) -> None:
    prepare_synthetic(seed, DEFAULT_PREPROCESSING, ranges)
with Pool(workers) as pool:
    pool.map(make, range(90000000, 90000000 + workers))  # warm-up: template and atlas loaded once per process
    start = time.perf_counter()
    pool.map(make, range(90000100, 90000100 + 3 * workers), chunksize=3)
    print(3 * workers / (time.perf_counter() - start))
EOF
)
    E=$("$PYTHON" -c "import math; print(min(60, max(4, math.floor(0.85 * 960 * $rate / $STUDIES))))")
    echo "probe: $rate studies/s -> E = $E epochs of $STUDIES studies"
fi
echo "$E" > "$OUT/E"
C=$(( (E + 2) / 4 )); (( C < 1 )) && C=1
# The stage in its own process group, stopped as a whole at the deadline (the last finished epoch's
# last.ckpt stays for the next call).
RUNS=$RUNS setsid scripts/train_cv.sh pretrain --init-weights runs/cv-rms/pretrain/pkg \
    --lr 1e-3 --constant-epochs "$C" --decay-end-epoch "$E" --max-epochs "$E" --seed 50200000 \
    --synthetic "$STUDIES" --windows-per-study 4 --synthesis "$S_W" --accelerator gpu --workers "$WORKERS" \
    > "$OUT/train.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2> /dev/null && (( $(date +%s) < START + DEADLINE_S )); do sleep 2; done
if kill -0 "$pid" 2> /dev/null; then
    kill -TERM -- "-$pid"; sleep 5; kill -KILL -- "-$pid" 2> /dev/null || true
fi
status=0; wait "$pid" || status=$?
grep -v Warning "$OUT/train.log" | tail -n 40
echo "train exit $status after $(( $(date +%s) - START )) s"
if [[ -f $RUNS/pretrain/pkg/manifest.json && $status == 0 ]]; then
    cp "$RUNS/pretrain/pkg/manifest.json" "$RUNS/pretrain/pkg/weights.pt" "$OUT/"
fi
[[ -f $RUNS/pretrain/work/checkpoints/last.ckpt ]] && cp "$RUNS/pretrain/work/checkpoints/last.ckpt" "$OUT/"
ls -la "$OUT"
