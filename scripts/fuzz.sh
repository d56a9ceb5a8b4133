#!/usr/bin/env bash
# Runs the cargo-fuzz targets (nightly + cargo-fuzz, outside the workspace).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   fuzz each target SECONDS (default 60), from its seeds
#   scripts/fuzz.sh --check [TARGET...]     run every seed of each target once (no fuzzing)
#   scripts/fuzz.sh --minimise [TARGET...]  fold the working corpus into the seeds, minimised
#
# TARGET is a name from the table below (default: all). Each fuzz crate keeps
#   fuzz/seeds/<target>/   the minimised seed set, committed;
#   fuzz/corpus/<target>/  the working corpus a run grows (git-ignored; a CI job would keep it as an artifact).
# A run reads the seeds and writes what it finds into the working corpus; `--minimise` merges
# both back into the seeds by edge coverage (`cargo fuzz cmin` with libFuzzer's -use_counters=0:
# every edge reached stays reached, hit-count variants are dropped), ready to commit.
# Builds and runs at nice 19 (KEYWARD_FUZZ_NICE) in their own target directory
# (KEYWARD_FUZZ_TARGET_DIR), never the workspace's: the fuzz build's flags differ.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# crate directory and target, one per line.
targets="webhook/fuzz review
template/fuzz parse
template/fuzz render
providers/fuzz request
providers/fuzz kubeconfig"

mode=run
seconds=60
case "${1:-}" in
    --check) mode=check; shift ;;
    --minimise|--minimize) mode=minimise; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    ''|*[!0-9]*) ;;
    *) seconds=$1; shift ;;
esac
wanted=("$@")

target_dir="${KEYWARD_FUZZ_TARGET_DIR:-$HOME/.cache/keyward/fuzz-target}"
nice_level="${KEYWARD_FUZZ_NICE:-19}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
# Release with debug assertions and no sanitizer: the code under test is safe Rust.
build_flags=(--fuzz-dir . -O -a --sanitizer none --target-dir "$target_dir")

selected() {
    [ ${#wanted[@]} -eq 0 ] && return 0
    local w
    for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

fuzz() { nice -n "$nice_level" cargo +nightly fuzz "$@"; }

ran=()
while read -r crate target; do
    selected "$target" || continue
    cd "$root/$crate"
    mkdir -p "seeds/$target" "corpus/$target"
    printf '\n==> %s %s (%s)\n' "$crate" "$target" "$(date -u +%T)"
    case $mode in
        run)
            fuzz run "${build_flags[@]}" "$target" "corpus/$target" "seeds/$target" -- \
                -max_total_time="$seconds"
            ;;
        check)
            fuzz run "${build_flags[@]}" "$target" "seeds/$target" -- -runs=0
            ;;
        minimise)
            cp -n "corpus/$target"/* "seeds/$target"/ 2>/dev/null || true
            fuzz cmin "${build_flags[@]}" "$target" "seeds/$target" -- -use_counters=0
            echo "seeds/$target: $(find "seeds/$target" -type f | wc -l) inputs"
            ;;
    esac
    ran+=("$crate/seeds/$target")
done <<< "$targets"
cd "$root"

if [ ${#ran[@]} -eq 0 ]; then
    echo "no such target: ${wanted[*]}" >&2
    exit 2
fi
case $mode in
    run)
        echo
        echo "New inputs are in each crate's fuzz/corpus/<target> (git-ignored). To keep them, minimise"
        echo "them into the committed seeds and commit those:"
        echo "  scripts/fuzz.sh --minimise${wanted[*]:+ ${wanted[*]}}"
        echo "  git add ${ran[*]}"
        ;;
    minimise)
        echo
        echo "Commit the seeds: git add ${ran[*]}"
        ;;
esac
