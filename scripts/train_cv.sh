#!/usr/bin/env bash
# Issue 13's recipe, one command per stage; the same recipe trains both cross-validation folds
# and the shipped model, and benchmarks/real_scan_cv.py scores the folds.
#
#   scripts/train_cv.sh pretrain      # stage 1: synthetic studies only (no real case), last epoch kept
#   scripts/train_cv.sh foldA         # stage 2: from the pretrain, + case 0001 as injection background
#   scripts/train_cv.sh foldB         # stage 2: from the pretrain, + case 0003 as injection background
#   scripts/train_cv.sh shipped       # stage 2: from the pretrain, + both cases
#   scripts/train_cv.sh evaluate      # real_scan_cv.py on foldA/foldB, post-processing chosen per fold
#                                     # (threshold, size, edge depth, contralateral check)
#   scripts/train_cv.sh ship          # shipped stage's package: post-processing + confidence threshold
#                                     # chosen (both cases + synthetic), then copied over the bundled package
#   scripts/train_cv.sh pair          # the second bundled package, lambdaunet-dwi-pair (issue 13's rule 48):
#                                     # rule 40's stage 2 on the committed BatchNorm and GroupNorm-stem stage 1s,
#                                     # averaged, seeded by the BatchNorm stage 1, then ship (about 8 minutes)
#   scripts/train_cv.sh release       # the bundled default, lambdaunet-dwi 2.5.0 (issue 13's rules 102-103 and 106),
#                                     # from the committed stage 1 D' (rule 100's stage 2 on both real cases, averaged
#                                     # with that stage 1 at 0.7, then ship), in runs/release-2.5.0 (RELEASE_RUNS=);
#                                     # RELEASE_DRAW=D2prime RELEASE_VERSION=2.4.0 rebuilds 2.4.0 from stage 1 D2'
#                                     # (rule 103), and with RELEASE_ALPHA=0.5 RELEASE_VERSION=2.3.0 2.3.0 (rule 102);
#                                     # RELEASE_SHIP=0 stops at the network, before ship;
#                                     # STAGE1_FROM_SCRATCH=1 trains that stage 1 and the one it continues
#                                     # (runs/cv-rms's) again first instead of copying it
#   scripts/train_cv.sh ensemble      # the third bundled package, lambdaunet-dwi-ensemble 1.0.0 (issue 13's rules 119
#                                     # and 143): the bundled default's network (2.5.0) with 2.4.0's, rebuilt by
#                                     # release (RELEASE_DRAW=D2prime, RELEASE_SHIP=0) unless runs/release-2.4.0 has it,
#                                     # attached as its partner, then ship in runs/ensemble-1.0.0 (ENSEMBLE_RUNS=)
#   SEED_FROM=pretrain scripts/train_cv.sh ship   # the same, with the pretrain attached first as the
#                                     # package's seed network (scripts/attach_network.py, threshold 0.5);
#                                     # SEED_FROM names a stage of $RUNS or, with a "/", any package directory
#   PARTNER_FROM=DIR scripts/train_cv.sh ship     # the same, with DIR's package (a stage of $RUNS or a
#                                     # package directory) attached first as its partner network:
#                                     # the two networks' probabilities averaged (issue 13's rule 48)
#
# Issue 13's ablation, a learned contralateral channel against the paper's two channels: the same
# stage 2 (steps, seed, lr) with the input [eADC, DWI, dwi_asymmetry], from the same two-channel
# pretrain (--init-weights widens its stem with zero weights for the new channel, so each run starts
# as the two-channel model):
#
#   scripts/train_cv.sh foldA-contra  # stage 2 as foldA, + the dwi_asymmetry channel
#   scripts/train_cv.sh foldB-contra  # stage 2 as foldB, + the dwi_asymmetry channel
#   scripts/train_cv.sh evaluate-contra   # real_scan_cv.py on foldA-contra/foldB-contra, as evaluate
#   scripts/train_cv.sh shipped-contra    # stage 2 as shipped, + the dwi_asymmetry channel
#   SHIP_FROM=shipped-contra scripts/train_cv.sh ship   # ship that one instead
#
# Issue 13's CarveMix trial: the same stage 2 with half of its synthetic studies given 1-3 of the
# fold's real lesions, carved from the background case's expert mask and pasted in through S0 and ADC
# (training/carved_lesions.py); the evaluation case's lesions are never carved:
#
#   scripts/train_cv.sh foldA-carve   # stage 2 as foldA, + --carve-probability 0.5 (lesions of case 0001)
#   scripts/train_cv.sh foldB-carve   # stage 2 as foldB, + --carve-probability 0.5 (lesions of case 0003)
#   scripts/train_cv.sh evaluate-carve    # real_scan_cv.py on foldA-carve/foldB-carve, as evaluate
#
# Issue 13's lesion-level loss trial: the same stage 2 with the blob loss added (training/losses.py:
# every lesion of a window scored alone, so each small satellite or embolus weighs as much as a
# large infarct):
#
#   scripts/train_cv.sh foldA-blob    # stage 2 as foldA, --loss blob_dice_bce
#   scripts/train_cv.sh foldB-blob    # stage 2 as foldB, --loss blob_dice_bce
#   scripts/train_cv.sh evaluate-blob     # real_scan_cv.py on foldA-blob/foldB-blob, as evaluate
#
# Issue 13's WiSE-FT trial (training/weight_interpolation.py): each fold's stage-2 package averaged
# in weight space with the pretrain it started from, (1 - ALPHA) * pretrain + ALPHA * fold; no training,
# no data (ALPHA fixed in advance, default 0.5):
#
#   scripts/train_cv.sh wise          # $RUNS/foldA-wise-$ALPHA/pkg and $RUNS/foldB-wise-$ALPHA/pkg
#   scripts/train_cv.sh evaluate-wise     # real_scan_cv.py on those two, as evaluate
#
# A fold's own stage 1 (issue 13's rule 138: each fold's stage 1 trained with its own real case as a
# background): where $RUNS/pretrain-foldA/pkg (or -foldB) holds a package, that fold's stage 2
# starts from it and its WiSE average pulls back towards it, instead of $RUNS/pretrain/pkg.
#
# Issue 13's rule 105, two stage-1 draws' folds averaged in weight space (a soup, training/weight_soup.py):
# $RUNS/foldA/pkg and $RUNS/foldB/pkg become the uniform soups of the runs folders in SOUP_OF, each
# fold of its own, from their stage FOLD_SUFFIX (e.g. -wise-0.7: each folder's foldA-wise-0.7); no training:
#
#   SOUP_OF="runs/X runs/Y" FOLD_SUFFIX=-wise-0.7 RUNS=runs/Z scripts/train_cv.sh soup   # then evaluate
#
# Issue 13's stage-1 seeds: each fold's model with its components kept only where the pretrain
# (stage 1, no real case) detects something (benchmarks/real_scan_cv.py --seed-packages):
#
#   scripts/train_cv.sh evaluate-seeded   # real_scan_cv.py on foldA/foldB seeded by the pretrain, as evaluate
#
# The seed network of evaluate-seeded (default: this run's own stage 1) and of ship (none unless
# given): SEED_FROM, a stage of $RUNS ("pretrain") or, with a "/", any package directory, e.g.
# issue 13's rule 46, GroupNorm-stem folds seeded by the BatchNorm stage 1:
#   SEED_FROM=runs/cv-rms-temporal/pretrain/pkg RUNS=runs/cv-rms-temporal-gnstem-gentle-massive-r5 scripts/train_cv.sh evaluate-seeded
#
# Checkpoint rule, fixed in advance: the last epoch of each stage (no real case chooses a
# checkpoint). Every stage writes last.ckpt after each epoch under $RUNS/<stage>/work and
# resumes from it when re-run (RESUME=1 is the default), so a stage may span sessions.
# Extra arguments pass through to `lambdasegment train` (e.g. --accelerator gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
# The Lambda+ query normalisation: "rms" (2.1.0: issue 13's numerical guard,
# models.lambda_plus.QueryRMSNorm) or "batch" (the paper's; 2.0.0). Each has its own runs folder
# with its committed stage-1 package: runs/cv-rms (default) and runs/cv, so 2.0.0's recipe is
#   QUERY_NORM=batch RUNS=runs/cv SHIP_VERSION=2.0.0 scripts/train_cv.sh shipped   (etc.)
QUERY_NORM=${QUERY_NORM:-rms}
# The Lambda+ content-lambda normalisation: "none" (the paper's; every package so far) or "rms"
# (models.lambda_plus.ContentRMSNorm: each slice's global context at unit RMS, so that one slice's
# activations cannot run away from its neighbours' and the slice be dropped; docs/MODEL_CARD.md,
# "A dropped slice"). It changes the architecture, so it needs its own runs folder from the pretrain on:
#   CONTENT_NORM=rms RUNS=runs/cv-rms-content scripts/train_cv.sh pretrain   (then foldA, foldB, evaluate, ...)
CONTENT_NORM=${CONTENT_NORM:-none}
# The normalisation of every block: "batch" (the paper's BatchNorm; every package so far) or
# "group" (GroupNorm, each slice by its own statistics, no running statistics:
# models.unet_blocks.make_norm). It changes the architecture, so it needs its own runs folder:
#   NORM=group RUNS=runs/cv-rms-gn scripts/train_cv.sh pretrain   (then foldA, foldB, evaluate, ...)
NORM=${NORM:-batch}
# The normalisation of the stem and the first encoder block only ("inc" and "downs.0"): empty (as
# NORM; every package so far) or "group" (models.lambda_unet.LambdaUNet stem_norm): no batch
# statistics in the two levels where they decided whether whole-territory infarcts were found
# (benchmarks/batchnorm_swap.py). It changes the architecture, so it needs its own runs folder;
# stage 1 may continue a BatchNorm stage 1 (--init-weights converts it: training/init_weights.py),
# as issue 13's rule 43 did, with the same continuation as runs/cv-rms-temporal's stage 1:
#   STEM_NORM=group RUNS=runs/cv-rms-temporal-gnstem scripts/train_cv.sh pretrain --init-weights runs/cv-rms/pretrain/pkg \
#       --lr 1e-3 --constant-epochs 10 --decay-end-epoch 40 --max-epochs 40 --seed 50100000 --synthesis "$S"
STEM_NORM=${STEM_NORM:-}
# The channels per level: "16, 32, 64, 128, 256" (every package so far) or wider, each a multiple of
# value_dim 8 (issue 13's rule 126: capacity). It changes the architecture, so it needs its own runs
# folder; stage 1 may continue a narrower stage 1 (--init-weights widens it, function preserved:
# training/init_weights.py):
#   WIDTHS="24, 48, 96, 192, 384" RUNS=runs/cv-wide scripts/train_cv.sh pretrain --init-weights runs/cv-rms/pretrain/pkg ...
WIDTHS=${WIDTHS:-16, 32, 64, 128, 256}
[[ $WIDTHS =~ ^[0-9]+(, [0-9]+)*$ ]] || { echo "train_cv.sh: WIDTHS must read like \"16, 32, 64, 128, 256\", not $WIDTHS" >&2; exit 2; }
RUNS=${RUNS:-runs/cv-rms}
package_dir_of() {  # package_dir_of STAGE_OR_DIR: the package directory SEED_FROM or PARTNER_FROM names
    if [[ $1 == */* ]]; then echo "$1"; else echo "$RUNS/$1/pkg"; fi
}
SHIP_VERSION=${SHIP_VERSION:-2.1.0}  # the bundled package's version when the shipped stage is shipped
# the shipped stage's package name, and the bundled package ship replaces: the default (lambdaunet-dwi),
# a second bundled package (lambdaunet-dwi-pair, issue 13's rule 48), or a partner network's own name
SHIP_NAME=${SHIP_NAME:-lambdaunet-dwi}
RESULT=cv-rms; [[ $QUERY_NORM == batch ]] && RESULT=cv-recipe  # real_scan_cv.py result names (--label; LABEL= overrides)
[[ $CONTENT_NORM != none ]] && RESULT=$RESULT-content-$CONTENT_NORM
[[ $NORM != batch ]] && RESULT=$RESULT-norm-$NORM
[[ -n $STEM_NORM ]] && RESULT=$RESULT-stem-$STEM_NORM
[[ $WIDTHS != "16, 32, 64, 128, 256" ]] && RESULT=$RESULT-widths-${WIDTHS//, /-}
# What the post-processing search maximises per study (benchmarks/real_scan_cv.py --objective):
# "dice" (volume Dice; every package so far) or "targets" (issue 13's Dice, lesion F1 and
# false-positive mL at once), for the folds' evaluation and the shipped package alike.
OBJECTIVE=${OBJECTIVE:-dice}
ALPHA=${ALPHA:-0.5}  # the fine-tuned package's weight in the wise stage
BUNDLED=LambdaSegmentLib/resources/models/$SHIP_NAME  # where ship puts the package: the default, or a second bundled package
ISLES=${ISLES:-../shared/data/isles22}
stage=${1:?usage: scripts/train_cv.sh pretrain|foldA|foldB|shipped|evaluate|ship|pair|release|ensemble|soup|foldA-contra|foldB-contra|evaluate-contra|shipped-contra|foldA-carve|foldB-carve|evaluate-carve|foldA-blob|foldB-blob|evaluate-blob|wise|evaluate-wise|evaluate-seeded [train options]}
shift

PAPER_CHANNELS='["eadc", "dwi"]'
CONTRA_CHANNELS='["eadc", "dwi", "dwi_asymmetry"]'
model() {  # model CHANNELS [IN_CHANNELS]: sets MODEL, the one architecture and preprocessing of every stage
    local in_channels="" query_norm="" content_norm="" norm="" stem_norm=""  # defaults stay out of the config, as the pretrain package recorded it
    if [[ $# -ge 2 ]]; then in_channels=", \"in_channels\": $2"; fi
    if [[ $QUERY_NORM != batch ]]; then query_norm=", \"query_norm\": \"$QUERY_NORM\""; fi
    if [[ $CONTENT_NORM != none ]]; then content_norm=", \"content_norm\": \"$CONTENT_NORM\""; fi
    if [[ $NORM != batch ]]; then norm=", \"norm\": \"$NORM\""; fi
    if [[ -n $STEM_NORM ]]; then stem_norm=", \"stem_norm\": \"$STEM_NORM\""; fi
    MODEL=(--model lambda_unet --model-config "{\"widths\": [$WIDTHS], \"value_dim\": 8$query_norm$content_norm$norm$stem_norm$in_channels}"
           --preprocessing "{\"channels\": $1, \"in_plane_spacing_mm\": 2.0, \"normalization\": {\"dwi\": \"brain_median_clip4\", \"eadc\": \"clip01\"}, \"pad_multiple\": 16}")
}
# The input channels of every stage from stage 1 on: "paper" ([eADC, DWI]; every package so far)
# or "contra" ([eADC, DWI, dwi_asymmetry]: the contralateral difference learned from scratch rather
# than added in stage 2 as foldA-contra does). It changes the architecture, so it needs its own runs folder:
#   CHANNELS=contra RUNS=runs/cv-rms-contra1 scripts/train_cv.sh pretrain   (then foldA, foldB, evaluate, ...)
CHANNELS=${CHANNELS:-paper}
case $CHANNELS in
    paper) model "$PAPER_CHANNELS" ;;
    contra) model "$CONTRA_CHANNELS" 3; RESULT=$RESULT-channels-contra ;;
    *) echo "train_cv.sh: CHANNELS must be paper or contra, not $CHANNELS" >&2; exit 2 ;;
esac
WINDOWS=(--batch-size 4 --window-slices 8 --window-size 96 96 --lesion-probability 0.8 --artefact-augmentation 0.5
         --synthesis '{"in_plane_spacing_mm": [1.2, 2.0]}' --workers 1 --accelerator cpu --devices 1 --log-every-steps 4)

train() {  # train STAGE [options]: resumes from $RUNS/STAGE/work/checkpoints/last.ckpt when present
    local name=$1; shift
    local work="$RUNS/$name/work" resume=() package_name="lambdaunet-dwi-$name" version=2.0.0-dev
    if [[ $name == shipped* ]]; then package_name=$SHIP_NAME; version=$SHIP_VERSION; fi
    if [[ -f "$work/checkpoints/last.ckpt" && "${RESUME:-1}" == 1 ]]; then
        resume=(--resume "$work/checkpoints/last.ckpt")
    fi
    "$PYTHON" -m LambdaSegmentLib train "${MODEL[@]}" "${WINDOWS[@]}" --name "$package_name" --version "$version" \
        --output "$RUNS/$name/pkg" --work-dir "$work" --overwrite "${resume[@]}" "$@"
}

stage1_of() {  # stage1_of STAGE: the stage-1 package STAGE starts from (its own, rule 138, or the pretrain's)
    if [[ -f "$RUNS/pretrain-$1/pkg/manifest.json" ]]; then echo "$RUNS/pretrain-$1/pkg"; else echo "$RUNS/pretrain/pkg"; fi
}

finetune() {  # finetune STAGE BACKGROUND... : stage 2 from the pretrain's last epoch
    local name=$1; shift
    local backgrounds=()
    for case in "$@"; do backgrounds+=(--real-backgrounds "$ISLES/$case"); done
    local stage1
    stage1=$(stage1_of "$name")
    [[ -f "$stage1/manifest.json" ]] || { echo "train_cv.sh: run the pretrain stage first" >&2; exit 2; }
    train "$name" --init-weights "$stage1" \
        --loss dice_bce --optimizer adamw --lr 5e-4 --weight-decay 1e-4 --constant-epochs 2 --decay-end-epoch 4 --max-epochs 4 \
        --synthetic 4 --windows-per-study 12 "${backgrounds[@]}" --real-background-studies 4 --seed 51000000 "${EXTRA[@]}"
}

evaluate_folds() {  # evaluate_folds LABEL FOLD_SUFFIX [real_scan_cv options]: $RUNS/foldA$2 and foldB$2 scored, post-processing chosen per fold
    local label=$1 suffix=$2; shift 2
    "$PYTHON" benchmarks/real_scan_cv.py --label "$label" --fold-packages "A=$RUNS/foldA$suffix/pkg" "B=$RUNS/foldB$suffix/pkg" \
        --postprocessing choose --objective "$OBJECTIVE" "$@" --synthetic "${EXTRA[@]}"
}
# The post-processing search's steps (benchmarks/real_scan_cv.py --steps) for evaluate* and ship;
# SEARCH_STEPS="threshold edge contralateral" is issue 13's protocol N (no minimum lesion size:
# one real case of one lesion type cannot set a prior over lesion sizes; docs/ablation.md, rule 36).
SEARCH_STEPS=${SEARCH_STEPS:-threshold size edge contralateral}
read -r -a STEPS <<< "--steps $SEARCH_STEPS"
# The search's threshold values (benchmarks/real_scan_cv.py --thresholds); empty: its default grid
# 0.3-0.7. THRESHOLDS="0.1 0.2 0.3 0.4 0.5 0.6 0.7" is issue 13's protocol N' (rule 44: models
# that chose 0.3, the grid's lowest value, in every fold).
THRESHOLDS=${THRESHOLDS:-}
[[ -n $THRESHOLDS ]] && STEPS+=(--thresholds $THRESHOLDS)
# BILATERAL_MM=4 fixes the bilateral step on at that radius (real_scan_cv.py --bilateral-partner-mm;
# issue 13's rule 82); SEARCH_STEPS="... bilateral" searches it instead (off or 4 mm).
BILATERAL_MM=${BILATERAL_MM:-}
[[ -n $BILATERAL_MM ]] && STEPS+=(--bilateral-partner-mm "$BILATERAL_MM")
# BILATERAL_FRACTION=0.5: only a partner of at least half a lesion's voxels counts wherever the
# bilateral step is on (--bilateral-partner-fraction; rule 83; "0.5 0.25 0.1": the search chooses,
# rule 84). VALIDATION_LARGE=N adds N
# whole-territory infarcts to the search's validation studies (--validation-large; rule 83).
BILATERAL_FRACTION=${BILATERAL_FRACTION:-}
[[ -n $BILATERAL_FRACTION ]] && STEPS+=(--bilateral-partner-fraction $BILATERAL_FRACTION)  # several: searched
# BILATERAL_TOTAL=1 counts a lesion's mirror partners together (--bilateral-partner-total; rule 128).
[[ ${BILATERAL_TOTAL:-0} == 1 ]] && STEPS+=(--bilateral-partner-total)
# SATELLITE_MM=20 fixes the satellite exemption on at 20 mm (--satellite-mm; rule 133);
# SEARCH_STEPS="... satellite" searches it instead (off, 10 or 20 mm; rule 132).
SATELLITE_MM=${SATELLITE_MM:-}
[[ -n $SATELLITE_MM ]] && STEPS+=(--satellite-mm "$SATELLITE_MM")
# SATELLITE_EDGE_ONLY=1: with SATELLITE_MM, the exemption lifts the edge check alone (rule 134).
[[ ${SATELLITE_EDGE_ONLY:-0} == 1 ]] && STEPS+=(--satellite-edge-only)
# MARGIN_CAPPED=1: wherever the searched margin step is on, a voxel joins only where its DWI is at
# most its lesion's median (--margin-capped; rule 137; needs margin or margin_fraction in SEARCH_STEPS).
[[ ${MARGIN_CAPPED:-0} == 1 ]] && STEPS+=(--margin-capped)
# EDGE_MAX_HEIGHT=0.5: wherever the searched edge check is on, it drops only lesions in the brain's
# lower half, where the skull-base rims are (--edge-max-height; rule 145; needs edge in SEARCH_STEPS).
EDGE_MAX_HEIGHT=${EDGE_MAX_HEIGHT:-}
[[ -n $EDGE_MAX_HEIGHT ]] && STEPS+=(--edge-max-height "$EDGE_MAX_HEIGHT")
# BY_THICKNESS=1: each fold chooses one post-processing on its own case natively and one on its
# 6 mm slabs, the second scoring every study of slices >= 4 mm (--by-thickness; rule 147; not ship).
[[ ${BY_THICKNESS:-0} == 1 ]] && STEPS+=(--by-thickness)
VALIDATION_LARGE=${VALIDATION_LARGE:-}
[[ -n $VALIDATION_LARGE ]] && STEPS+=(--validation-large "$VALIDATION_LARGE")
# VALIDATION_EMBOLIC=N adds N embolic showers of 2-10 mL to the search's validation studies
# (--validation-embolic; rule 141), so that a fold choosing on a territorial case sees small lesions.
VALIDATION_EMBOLIC=${VALIDATION_EMBOLIC:-}
[[ -n $VALIDATION_EMBOLIC ]] && STEPS+=(--validation-embolic "$VALIDATION_EMBOLIC")

# ship with 2.5.0's post-processing search (issue 13's protocol U-NL+B½ with the bilateral step
# fixed on, rules 85, 97 and 106): the release and every package built from its network search alike.
# The caller's environment (RUNS, SHIP_FROM, SHIP_NAME, ...) reaches the ship stage.
ship_with_release_search() {
    SEARCH_STEPS="threshold edge contralateral" BILATERAL_MM=4 BILATERAL_FRACTION=0.5 VALIDATION_LARGE=4 scripts/train_cv.sh ship
}

EXTRA=("$@")
case "$stage" in
    pretrain)
        train pretrain --loss dice_bce --optimizer adamw --lr 2e-3 --weight-decay 1e-4 \
            --constant-epochs 25 --decay-end-epoch 65 --max-epochs 65 \
            --synthetic 8 --windows-per-study 16 --seed 50000000 "${EXTRA[@]}" ;;
    foldA) finetune foldA sub-strokecase0001 ;;
    foldB) finetune foldB sub-strokecase0003 ;;
    shipped) finetune shipped sub-strokecase0001 sub-strokecase0003 ;;
    foldA-contra) model "$CONTRA_CHANNELS" 3; finetune foldA-contra sub-strokecase0001 ;;
    foldB-contra) model "$CONTRA_CHANNELS" 3; finetune foldB-contra sub-strokecase0003 ;;
    foldA-carve) EXTRA+=(--carve-probability 0.5); finetune foldA-carve sub-strokecase0001 ;;
    foldB-carve) EXTRA+=(--carve-probability 0.5); finetune foldB-carve sub-strokecase0003 ;;
    foldA-blob) EXTRA+=(--loss blob_dice_bce); finetune foldA-blob sub-strokecase0001 ;;
    foldB-blob) EXTRA+=(--loss blob_dice_bce); finetune foldB-blob sub-strokecase0003 ;;
    shipped-contra) model "$CONTRA_CHANNELS" 3; finetune shipped-contra sub-strokecase0001 sub-strokecase0003 ;;
    evaluate) evaluate_folds "${LABEL:-$RESULT-pp-contralateral}" "" "${STEPS[@]}" ;;
    ship)
        ship_from="$RUNS/${SHIP_FROM:-shipped}/pkg"
        [[ -f "$ship_from/manifest.json" ]] || { echo "train_cv.sh: run the ${SHIP_FROM:-shipped} stage first" >&2; exit 2; }
        if [[ -n ${PARTNER_FROM:-} ]]; then  # e.g. PARTNER_FROM=runs/ship-tmg/shipped/pkg: averaged with the shipped one
            "$PYTHON" scripts/attach_network.py "$ship_from" "$(package_dir_of "$PARTNER_FROM")" --as partner
        fi
        if [[ -n ${SEED_FROM:-} ]]; then  # e.g. SEED_FROM=pretrain: that stage's package seeds the shipped one
            "$PYTHON" scripts/attach_network.py "$ship_from" "$(package_dir_of "$SEED_FROM")" --as seed --threshold 0.5
        fi
        "$PYTHON" benchmarks/real_scan_cv.py --ship "$ship_from" --objective "$OBJECTIVE" "${STEPS[@]}"
        confidence=benchmarks/results/confidence_threshold.json  # the default package's; another's beside it
        [[ $SHIP_NAME != lambdaunet-dwi ]] && confidence=benchmarks/results/confidence_threshold_$SHIP_NAME.json
        "$PYTHON" scripts/choose_confidence_threshold.py --model "$ship_from" --results "$confidence"
        mkdir -p "$BUNDLED"
        for attached in seed partner; do
            rm -rf "${BUNDLED:?}/$attached"
            if [[ -d "$ship_from/$attached" ]]; then cp -r "$ship_from/$attached" "$BUNDLED/$attached"; fi
        done
        cp "$ship_from/manifest.json" "$ship_from/weights.pt" "$BUNDLED/" ;;
    pair)  # issue 13's rule 48: the second bundled package, lambdaunet-dwi-pair, from the committed stage-1 packages
        S_TM='{"in_plane_spacing_mm": [1.2, 2.0], "susceptibility_gain": [4.0, 16.0], "susceptibility_probability": 0.95, "susceptibility_extent_mm": [3.0, 8.0], "susceptibility_temporal_probability": 0.8, "massive_infarct_probability": 0.5}'
        # runs folder, stage 1 it starts from, package name, STEM_NORM
        for spec in "ship-tm cv-rms-temporal lambdaunet-dwi-pair" "ship-tmg cv-rms-temporal-gnstem lambdaunet-dwi-pair-gnstem group"; do
            read -r runs stage1 name stem <<< "$spec"
            mkdir -p "runs/$runs/pretrain"
            rm -rf "runs/$runs/pretrain/pkg" && cp -r "runs/$stage1/pretrain/pkg" "runs/$runs/pretrain/"
            SHIP_VERSION=1.0.0 SHIP_NAME=$name STEM_NORM=$stem RUNS=runs/$runs scripts/train_cv.sh shipped --synthesis "$S_TM" --lr 1e-4 "${EXTRA[@]}"
        done
        SHIP_VERSION=1.0.0 SHIP_NAME=lambdaunet-dwi-pair RUNS=runs/ship-tm PARTNER_FROM=runs/ship-tmg/shipped/pkg \
            SEED_FROM=runs/cv-rms-temporal/pretrain/pkg SEARCH_STEPS="threshold edge contralateral" scripts/train_cv.sh ship ;;
    release)  # issue 13's rule 106: lambdaunet-dwi 2.5.0; 2.4.0 (rule 103) and 2.3.0 (rule 102, α 0.5) from D2' (2.2.0 was rule 47's withdrawn candidate)
        release_alpha=${RELEASE_ALPHA:-0.7}
        release_version=${RELEASE_VERSION:-2.5.0}
        S_TWN='{"in_plane_spacing_mm": [1.2, 2.0], "susceptibility_gain": [4.0, 16.0], "susceptibility_probability": 0.95, "susceptibility_extent_mm": [3.0, 8.0], "susceptibility_temporal_probability": 0.8, "massive_infarct_probability": 0.5, "cortical_s0": [1.0, 1.8], "skull_on_dura": false}'
        release_runs=${RELEASE_RUNS:-runs/release-$release_version}
        case ${RELEASE_DRAW:-Dprime} in  # the committed stage-1 draw the release continues, and its seed
            D2prime) stage1_runs=runs/cv-rms-temporal-cortical-stream509-noshell; stage1_seed=50900000 ;;  # rule 74
            Dprime) stage1_runs=runs/cv-rms-temporal-cortical-stream507-noshell; stage1_seed=50700000 ;;  # rule 106
            *) echo "train_cv.sh release: RELEASE_DRAW must be D2prime or Dprime, not $RELEASE_DRAW" >&2; exit 2 ;;
        esac
        if [[ ${STAGE1_FROM_SCRATCH:-0} == 1 ]]; then  # both stage 1s trained again (about 2.2 hours here for D', 2.5 for D2'), not copied
            S_WN='{"in_plane_spacing_mm": [1.2, 2.0], "susceptibility_gain": [4.0, 16.0], "susceptibility_probability": 0.95, "susceptibility_extent_mm": [3.0, 8.0], "susceptibility_temporal_probability": 0.8, "cortical_s0": [1.0, 1.8], "skull_on_dura": false}'
            RUNS=$release_runs/base scripts/train_cv.sh pretrain "${EXTRA[@]}"  # runs/cv-rms's stage 1
            RUNS=$release_runs scripts/train_cv.sh pretrain --init-weights "$release_runs/base/pretrain/pkg" --lr 1e-3 \
                --constant-epochs 1 --decay-end-epoch 4 --max-epochs 4 --seed "$stage1_seed" --synthetic 448 \
                --windows-per-study 4 --synthesis "$S_WN" "${EXTRA[@]}"
        else  # the committed stage 1
            mkdir -p "$release_runs/pretrain"
            rm -rf "$release_runs/pretrain/pkg" && cp -r "$stage1_runs/pretrain/pkg" "$release_runs/pretrain/"
        fi
        SHIP_NAME=lambdaunet-dwi-candidate SHIP_VERSION=0.0.0-rule100 RUNS=$release_runs scripts/train_cv.sh shipped --synthesis "$S_TWN" \
            --lr 1e-4 --seed 51000005 --rim-windows 0.3 --injected-whole-territory-per-epoch 1 --bright-fields 0.5 "${EXTRA[@]}"
        "$PYTHON" scripts/interpolate_weights.py "$release_runs/pretrain/pkg" "$release_runs/shipped/pkg" --alpha "$release_alpha" \
            --name lambdaunet-dwi --version "$release_version" --output "$release_runs/shipped-wise-$release_alpha/pkg" --overwrite
        [[ ${RELEASE_SHIP:-1} == 1 ]] || exit 0  # RELEASE_SHIP=0: the network only, for a candidate gated before it ships
        RUNS=$release_runs SHIP_FROM=shipped-wise-$release_alpha ship_with_release_search ;;
    ensemble)  # issue 13's rule 143: two stage-1 draws' release networks averaged in probability (rule 119 (c))
        ensemble_runs=${ENSEMBLE_RUNS:-runs/ensemble-1.0.0}
        partner=runs/release-2.4.0/shipped-wise-0.7/pkg
        if [[ ! -f $partner/manifest.json ]]; then
            RELEASE_DRAW=D2prime RELEASE_VERSION=2.4.0 RELEASE_SHIP=0 scripts/train_cv.sh release "${EXTRA[@]}"
        fi
        mkdir -p "$ensemble_runs/primary"
        rm -rf "$ensemble_runs/primary/pkg" && cp -r LambdaSegmentLib/resources/models/lambdaunet-dwi "$ensemble_runs/primary/pkg"
        rm -rf "$ensemble_runs/primary/pkg/partner" "$ensemble_runs/primary/pkg/seed"
        # the copy is renamed; its network and the rest of its manifest stay the default's (ship chooses
        # the post-processing and the confidence threshold again, with both networks)
        "$PYTHON" - "$ensemble_runs/primary/pkg/manifest.json" <<'RENAME'
import json, sys
path = sys.argv[1]
manifest = json.load(open(path, encoding="utf-8"))
manifest.update(name="lambdaunet-dwi-ensemble", version="1.0.0")
for key in ("partner_network", "seed_network"):
    manifest.pop(key, None)
with open(path, "w", encoding="utf-8") as handle:
    json.dump(manifest, handle, indent=2)
    handle.write("\n")
RENAME
        SHIP_VERSION=1.0.0 SHIP_NAME=lambdaunet-dwi-ensemble RUNS=$ensemble_runs SHIP_FROM=primary PARTNER_FROM=$partner \
            ship_with_release_search ;;
    wise)
        for fold in foldA foldB; do
            "$PYTHON" scripts/interpolate_weights.py "$(stage1_of $fold)" "$RUNS/$fold/pkg" --alpha "$ALPHA" --output "$RUNS/$fold-wise-$ALPHA/pkg" --overwrite
        done ;;
    soup)
        read -r -a soup_of <<< "${SOUP_OF:?train_cv.sh soup: SOUP_OF must name two or more runs folders}"
        [[ ${#soup_of[@]} -ge 2 ]] || { echo "train_cv.sh soup: SOUP_OF must name two or more runs folders, not ${SOUP_OF}" >&2; exit 2; }
        for fold in foldA foldB; do
            "$PYTHON" scripts/soup_weights.py "${soup_of[@]/%//$fold${FOLD_SUFFIX:-}/pkg}" --output "$RUNS/$fold/pkg" --overwrite
        done ;;
    evaluate-wise) evaluate_folds "${LABEL:-$RESULT-wise-$ALPHA}" "-wise-$ALPHA" "${STEPS[@]}" ;;
    evaluate-seeded)
        seed=$(package_dir_of "${SEED_FROM:-pretrain}")
        evaluate_folds "${LABEL:-$RESULT-seeded}" "" "${STEPS[@]}" --seed-packages "A=$seed" "B=$seed" ;;
    evaluate-contra) evaluate_folds "${LABEL:-$RESULT-contra}" -contra --steps threshold size edge ;;
    evaluate-carve) evaluate_folds "${LABEL:-$RESULT-carve}" -carve "${STEPS[@]}" ;;
    evaluate-blob) evaluate_folds "${LABEL:-$RESULT-blob}" -blob "${STEPS[@]}" ;;
    *) echo "train_cv.sh: unknown stage $stage" >&2; exit 2 ;;
esac
