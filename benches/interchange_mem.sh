#!/usr/bin/env bash
# Peak memory (max RSS) of the release `uwf export` and `uwf import` processes (of a directory
# and of a .tar.zst archive), and the size
# of uwf.redb beside the disk usage of the exported layout, at 100k nodes (and 1M with
# UWF_BENCH_1M=1).
#
#   benches/interchange_mem.sh [DIR]      # DIR keeps the fixtures (default: a temp dir)
#
# The fixtures are the fixed-seed stores of benches/interchange.rs (built once, reused).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cargo build --release --quiet --bin uwf
UWF_BENCH_DIR="$dir" UWF_BENCH_PREPARE_ONLY=1 cargo bench --quiet --bench interchange >/dev/null
uwf=$PWD/target/release/uwf
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

sizes="100k"
[ "${UWF_BENCH_1M:-}" = 1 ] && sizes="100k 1M"

# Runs "$@" under /usr/bin/time -v; prints wall seconds and max RSS in MB.
measure() {
    local log
    log=$(mktemp)
    /usr/bin/time -v "$@" >/dev/null 2>"$log" || { cat "$log" >&2; exit 1; }
    awk -F': ' '/Maximum resident set size/ {rss=$2}
        /Elapsed \(wall clock\)/ {n=split($2,a,":"); s=a[n]; if (n>1) s+=60*a[n-1]; if (n>2) s+=3600*a[n-2]; wall=s}
        END {printf "%.2f s, max RSS %.1f MB", wall, rss/1024}' "$log"
    rm -f "$log"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
# ext4 without a journal skips inodes freed in the last 60 s on every inode allocation: after
# deleting a layout, wait before creating files again (UWF_BENCH_SETTLE seconds).
clear() {
    if [ -e "$1" ]; then
        rm -rf "$1"
        sync
        sleep "${UWF_BENCH_SETTLE:-61}"
    fi
}

for s in $sizes; do
    root=$dir/$s
    clear "$root/mem-export"
    rm -rf "$root/mem-import"
    sync
    mkdir -p "$root/mem-import"
    echo "== $s nodes"
    echo "uwf export: $(UWF_HOME=$root measure "$uwf" export "$root/mem-export")"
    echo "uwf import: $(UWF_HOME=$root/mem-import measure "$uwf" import "$root/layout")"
    rm -rf "$root/mem-import" "$root/mem.tar.zst"
    mkdir -p "$root/mem-import"
    echo "uwf export --archive .tar.zst: $(UWF_HOME=$root measure "$uwf" export --archive "$root/mem.tar.zst")"
    echo "uwf import .tar.zst: $(UWF_HOME=$root/mem-import measure "$uwf" import "$root/mem.tar.zst")"
    echo "archive: $(stat -c %s "$root/mem.tar.zst") bytes"
    rm -f "$root/mem.tar.zst"
    echo "uwf.redb (generated store):  $(stat -c %s "$root/uwf.redb") bytes"
    echo "uwf.redb (after the import): $(stat -c %s "$root/mem-import/uwf.redb") bytes"
    echo "layout du -sb: $(du -sb "$root/layout" | cut -f1) bytes (apparent size)"
    echo "layout du -sh: $(du -sh "$root/layout" | cut -f1) ($(du -sB1 "$root/layout" | cut -f1) bytes of blocks)"
    clear "$root/mem-export"
    rm -rf "$root/mem-import"
done
