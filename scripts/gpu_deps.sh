#!/usr/bin/env bash
# Packs what scripts/gpu_stage1.sh needs on a GPU machine that has PyTorch and Lightning but not
# this project's other dependencies and cannot reach a package index (DEPS=<folder>):
#   sitk.tar.xz    SimpleITK, from this checkout's .venv (its abi3 build runs on CPython >= 3.11)
#   pydeps.tar.xz  nilearn (code and the MNI152 templates the generator reads), nibabel, slicerio
#   lesymap-lesions/, arterial-atlas/   the generator's data, from ../shared/data
#
#   scripts/gpu_deps.sh [FOLDER]          # default .devcarry (git-ignored); about 45 MB
set -euo pipefail
cd "$(dirname "$0")/.."
FOLDER=${1:-.devcarry}
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
SHARED=${SHARED:-../shared/data}
mkdir -p "$FOLDER"
tar -C "$SITE" --exclude='__pycache__' -cf - SimpleITK | xz -T2 -6 > "$FOLDER/sitk.tar.xz"
# nilearn's tests, plotting assets and sample data other than the MNI152 templates stay behind.
tar -C "$SITE" --exclude='*/tests' --exclude='__pycache__' --exclude='nilearn/_assets' \
    --exclude='nilearn/datasets/data/fsaverage5' --exclude='nilearn/datasets/data/image_10426.nii.gz' \
    --exclude='nilearn/datasets/data/test.mgz' --exclude='nilearn/datasets/data/mmap.dat' \
    -cJf "$FOLDER/pydeps.tar.xz" nilearn nibabel slicerio
rm -rf "$FOLDER/lesymap-lesions" "$FOLDER/arterial-atlas"
cp -r "$SHARED/lesymap-lesions" "$SHARED/arterial-atlas" "$FOLDER/"
chmod -R u+w "$FOLDER"  # ../shared may be read-only; a re-run must be able to replace the copies
du -sh "$FOLDER"
