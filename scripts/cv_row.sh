#!/usr/bin/env bash
# One row of issue 13's ablation from a stage-1 package: recipe TW's stage 2 (rule 54: recipe TM,
# i.e. lr 1e-4 and synthesis S with "massive_infarct_probability": 0.5, plus "cortical_s0": [1.0, 1.8])
# on both folds, then the folds scored seeded by that stage 1 under protocol N (threshold, edge depth,
# contralateral ratio), once per stage-2 seed:
#
#   STAGE1=runs/cv-soup-wll/pretrain/pkg NAME=cv-soup-wll scripts/cv_row.sh 51000005 51000006 51000007
#
# Each seed trains in runs/$NAME-gentle-massive-r<last digit of the seed> (resumable, as every
# train_cv.sh stage) and writes benchmarks/results/real_scan_cv/$NAME-gentle-massive-seed<SEED>-seeded.json;
# `benchmarks/real_scan_cv_table.py --means LABEL...` gives the row's held-out means.
# SYNTHESIS_EXTRA='{"edge_relative_adc": [0.65, 0.85]}' adds generator ranges to stage 2's synthesis
# (those of its stage 1, when that changed the lesions; issue 13's rule 64).
# STAGE2_OPTIONS='--rim-windows 0.3' adds `lambdasegment train` options to both folds' stage 2
# (split on spaces; issue 13's rule 81).
# PROTOCOL=u-nlb scores the folds under protocol U-NL+B½ instead (issue 13's rule 85: no seed
# network; the search with four whole-territory validation studies and the bilateral step at a
# partner share of 0.5), writing $NAME-gentle-massive-seed<SEED>-unseeded-nlb.json.
# PROTOCOL=u-nlbf: U-NL+B½ with the bilateral step fixed on instead of searched (issue 13's rule 97),
# writing $NAME-gentle-massive-seed<SEED>-unseeded-nlbf.json.
# PROTOCOL=none trains the row's networks (and their WiSE averages) and scores nothing: a committed
# row's networks rebuilt to be searched again (runs folders are not kept; issue 13's rule 141).
# WISE=ALPHA (with PROTOCOL=u-nlb or u-nlbf): each fold is pulled back towards the stage 1 it started
# from in weight space, (1 - ALPHA) x stage 1 + ALPHA x fold (train_cv.sh wise, WiSE-FT), and those
# packages are scored instead (issue 13's rule 102); give the row a NAME of its own.
# PARTNER=ROW (with PROTOCOL=u-nlb or u-nlbf): each fold's probability is averaged with the same
# seed's and fold's network of the row named ROW (real_scan_cv.py --partner-packages; that row's
# runs folders must exist, WiSE-averaged as this row's), an ensemble of two stage-1 draws, writing
# $NAME-gentle-massive-seed<SEED>-unseeded-nlb[f]-ensemble.json (issue 13's rule 119).
# TEACHERS="ROW ..." (with PROTOCOL=u-nlb or u-nlbf): each fold's stage 2 also learns the mean
# probability of the same seed's and fold's networks of the rows named (`lambdasegment train
# --teacher`, one per row, at --distill-weight 0.5; those rows' runs folders must exist,
# WiSE-averaged as this row's): one network distilled from an ensemble of draws (issue 13's rule 120).
# STAGE1_A=PKG and/or STAGE1_B=PKG: that fold starts from its own stage 1 instead of STAGE1 (copied to
# $runs/pretrain-foldA/pkg or -foldB, which train_cv.sh's fold and wise stages prefer), e.g. a stage 1
# trained with the fold's own real case as a background (issue 13's rule 138).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE1=${STAGE1:?STAGE1= the stage-1 package directory}
NAME=${NAME:?NAME= the name of the row}
STAGE1_A=${STAGE1_A:-} STAGE1_B=${STAGE1_B:-}
for stage1 in "$STAGE1" ${STAGE1_A:+"$STAGE1_A"} ${STAGE1_B:+"$STAGE1_B"}; do
    [[ -f "$stage1/manifest.json" ]] || { echo "cv_row.sh: $stage1: no package there" >&2; exit 2; }
done
(( $# > 0 )) || { echo "usage: STAGE1=PKG NAME=NAME scripts/cv_row.sh SEED [SEED ...]" >&2; exit 2; }
S_TW='{"in_plane_spacing_mm": [1.2, 2.0], "susceptibility_gain": [4.0, 16.0], "susceptibility_probability": 0.95, "susceptibility_extent_mm": [3.0, 8.0], "susceptibility_temporal_probability": 0.8, "massive_infarct_probability": 0.5, "cortical_s0": [1.0, 1.8]}'
if [[ -n ${SYNTHESIS_EXTRA:-} ]]; then
    S_TW=$("${PYTHON:-.venv/bin/python}" -c 'import json, sys; print(json.dumps({**json.loads(sys.argv[1]), **json.loads(sys.argv[2])}))' \
        "$S_TW" "$SYNTHESIS_EXTRA" 2>/dev/null) || { echo "cv_row.sh: SYNTHESIS_EXTRA is not a JSON object: $SYNTHESIS_EXTRA" >&2; exit 2; }
fi
read -r -a stage2_options <<< "${STAGE2_OPTIONS:-}"
PROTOCOL=${PROTOCOL:-seeded}
[[ $PROTOCOL == seeded || $PROTOCOL == u-nlb || $PROTOCOL == u-nlbf || $PROTOCOL == none ]] \
    || { echo "cv_row.sh: PROTOCOL must be seeded, u-nlb, u-nlbf or none, not $PROTOCOL" >&2; exit 2; }
WISE=${WISE:-}
evaluate=evaluate
if [[ -n $WISE ]]; then
    [[ $WISE =~ ^(0?\.[0-9]+|1(\.0*)?)$ ]] || { echo "cv_row.sh: WISE must be a number in (0, 1], not $WISE" >&2; exit 2; }
    [[ $PROTOCOL != seeded ]] || { echo "cv_row.sh: WISE needs PROTOCOL=u-nlb or u-nlbf" >&2; exit 2; }
    evaluate=evaluate-wise
fi
PARTNER=${PARTNER:-}
read -r -a teachers <<< "${TEACHERS:-}"
row_pkg() { echo "runs/$1-gentle-massive-r${2: -1}/fold$3${WISE:+-wise-$WISE}/pkg"; }  # row_pkg ROW SEED A|B
if [[ $PROTOCOL == seeded ]]; then
    [[ -z $PARTNER ]] || { echo "cv_row.sh: PARTNER needs PROTOCOL=u-nlb or u-nlbf" >&2; exit 2; }
    (( ${#teachers[@]} == 0 )) || { echo "cv_row.sh: TEACHERS needs PROTOCOL=u-nlb or u-nlbf" >&2; exit 2; }
fi
for row in ${PARTNER:+"$PARTNER"} "${teachers[@]}"; do  # every seed's partner and teacher networks checked before any training
    for seed in "$@"; do
        for fold in A B; do
            [[ -f "$(row_pkg "$row" "$seed" $fold)/manifest.json" ]] \
                || { echo "cv_row.sh: $(row_pkg "$row" "$seed" $fold): no package there (run row $row first)" >&2; exit 2; }
        done
    done
done
for seed in "$@"; do
    runs="runs/$NAME-gentle-massive-r${seed: -1}"
    mkdir -p "$runs/pretrain"
    rm -rf "$runs/pretrain/pkg" && cp -r "$STAGE1" "$runs/pretrain/pkg"
    for fold in A B; do  # a fold's own stage 1, or none (a folder reused from an earlier row keeps no stale one)
        own=STAGE1_$fold
        rm -rf "$runs/pretrain-fold$fold"
        [[ -z ${!own} ]] || { mkdir -p "$runs/pretrain-fold$fold" && cp -r "${!own}" "$runs/pretrain-fold$fold/pkg"; }
    done
    for fold in A B; do
        teacher_options=()
        for row in "${teachers[@]}"; do teacher_options+=(--teacher "$(row_pkg "$row" "$seed" $fold)"); done
        (( ${#teachers[@]} == 0 )) || teacher_options+=(--distill-weight 0.5)
        RUNS=$runs scripts/train_cv.sh "fold$fold" --synthesis "$S_TW" --lr 1e-4 --seed "$seed" "${stage2_options[@]}" "${teacher_options[@]}"
    done
    [[ -z $WISE ]] || RUNS=$runs ALPHA=$WISE scripts/train_cv.sh wise
    partner=() suffix=""
    if [[ -n $PARTNER ]]; then
        partner=(--partner-packages "A=$(row_pkg "$PARTNER" "$seed" A)" "B=$(row_pkg "$PARTNER" "$seed" B)")
        suffix=-ensemble
    fi
    if [[ $PROTOCOL == none ]]; then
        echo "cv_row.sh: $runs trained, not scored (PROTOCOL=none)"
    elif [[ $PROTOCOL == u-nlb ]]; then
        RUNS=$runs VALIDATION_LARGE=4 BILATERAL_FRACTION=0.5 SEARCH_STEPS="threshold edge contralateral bilateral" \
            LABEL="$NAME-gentle-massive-seed$seed-unseeded-nlb$suffix" ALPHA=$WISE scripts/train_cv.sh "$evaluate" "${partner[@]}"
    elif [[ $PROTOCOL == u-nlbf ]]; then
        RUNS=$runs VALIDATION_LARGE=4 BILATERAL_MM=4 BILATERAL_FRACTION=0.5 SEARCH_STEPS="threshold edge contralateral" \
            LABEL="$NAME-gentle-massive-seed$seed-unseeded-nlbf$suffix" ALPHA=$WISE scripts/train_cv.sh "$evaluate" "${partner[@]}"
    else
        RUNS=$runs SEARCH_STEPS="threshold edge contralateral" LABEL="$NAME-gentle-massive-seed$seed-seeded" \
            scripts/train_cv.sh evaluate-seeded
    fi
done
