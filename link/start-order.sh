#!/bin/bash
# Writes link/start.order: the functions of the `uwf` binary that its short commands run, command
# by command in the order below (each command's new ones sorted by name). build.rs hands the
# file to the linker (lld's `--symbol-ordering-file`), which puts those functions together at the
# front of the code, so a short process maps a few pages of code instead of pages spread over
# the whole binary (BENCHMARKS.md, "The code a short command runs, laid out together";
# ARCHITECTURE.md, "Process start").
#
#   link/start-order.sh            # builds the release binary, then runs the commands under callgrind
#
# Run it again after a dependency update, a change to how the binary is linked (a static C library
# puts its start in the binary) or a large change to the commands' paths: a name the
# binary no longer has is skipped, so a stale file only makes the start slower, never wrong.
# Needs valgrind and python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v valgrind >/dev/null || { echo "start-order: valgrind is needed" >&2; exit 1; }
cargo build --release --bin uwf
bin="$root/target/release/uwf"
if [ -f link/start.order ] && command -v nm >/dev/null; then
  had=$(nm "$bin" | awk '{print $NF}' | sort -u | comm -12 - <(sort -u link/start.order) | wc -l)
  echo "start-order: the binary has $had of the $(wc -l < link/start.order) functions the file named"
fi
work=$(mktemp -d)
answerer=""
trap '[ -n "$answerer" ] && kill "$answerer" 2>/dev/null; rm -rf "$work"' EXIT
export UWF_HOME="$work/home"
mkdir -p "$UWF_HOME"
printf -- '---\n$status: done\nnote: ok\n---\n' > "$work/front.md"

# A stand-in for a runner's submit socket: answers each submission with an id.
python3 - "$work/submit.sock" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    while c.recv(8192):
        pass
    c.sendall(b'{"Id":"ET4S8K8N280TP"}')
    c.close()
PY
answerer=$!
for _ in $(seq 100); do [ -S "$work/submit.sock" ] && break; sleep 0.05; done

wf=$("$bin" workflow put benches/count.yaml | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
t1=$("$bin" thread start count -p go -q)
t2=$("$bin" thread start count -p go -q)
n=0
traced() {
  n=$((n + 1))
  valgrind -q --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --compress-pos=no --callgrind-out-file="$work/cg.$(printf %02d $n)" "$bin" "$@" \
    < "$work/front.md" > /dev/null
}
# The most frequent first: what an agent process runs at every step, then a user's reads,
# then a step of an agent program.
traced --version
UWF_SUBMIT_SOCKET="$work/submit.sock" traced agent submit "$t1" worker
traced agent context "$t1" worker
traced cas get "$wf"
traced agent submit "$t2" worker
traced thread show "$t1"
traced thread list
traced workflow list
traced thread start count -p go -q
# A step with an agent program, as a shell loop of `uwf thread step` runs it.
printf '#!/bin/sh\nexec "%s" agent submit "$1" "$2" < "%s"\n' "$bin" "$work/front.md" > "$work/agent.sh"
chmod +x "$work/agent.sh"
t3=$("$bin" thread start count -p go -q)
traced thread step "$t3" --agent "$work/agent.sh"

python3 - "$bin" "$work"/cg.* > link/start.order <<'PY'
import re, sys
# Functions of the binary (object sys.argv[1]) each profile names, a profile after the other; within
# one profile sorted by name, so that the file does not change with the order callgrind writes.
binary, seen = sys.argv[1], set()
for path in sys.argv[2:]:
    ob = cob = None
    names = set()
    for line in open(path, errors="replace"):
        key, _, value = line.rstrip("\n").partition("=")
        if key == "ob":
            ob = value
        elif key == "cob":
            cob = value
        elif key in ("fn", "cfn"):
            owner = (cob or ob) if key == "cfn" else ob
            if key == "cfn":
                cob = None
            # Names only: an address is code without a symbol. A recursive call's frames are
            # the function's name with callgrind's depth after it (`'2`): the same function.
            if owner == binary and not value.startswith(("0x", "(")):
                names.add(re.sub(r"'[0-9]+$", "", value))
    for name in sorted(names - seen):
        print(name)
    seen |= names
PY
echo "start-order: $(wc -l < link/start.order) functions in link/start.order"
