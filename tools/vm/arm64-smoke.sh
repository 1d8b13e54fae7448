#!/bin/sh
# The arm64 VM's run by hand (docs/arm64-vm.md): sits doctor, a capture from
# vivid shown on vkms with writeback verification, and the probe smoke test
# of the vm tier (probes attached while a capture runs); each step timed.
#   tools/vm/run --arch arm64 --timeout 0 --idle-timeout 900 --rwdir build/arm64-smoke \
#       -- sh tools/vm/arm64-smoke.sh build/arm64-smoke
# SMOKE_SIZE / SMOKE_FRAMES change the capture (default 640x480, 60 frames; vivid offers 320x180, not 320x240).
out=${1:-build/arm64-smoke}
mkdir -p "$out"
now() { date +%s%N; }
step() {
    name=$1; shift
    echo "== $name: $*"
    t0=$(now)
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "== $name: exit $rc in $(( ($(now) - t0) / 1000000 )) ms"
    tail -n 40 "$out/$name.log"
}
echo "== guest: $(uname -rm), $(nproc) CPUs, python $(python3 -c 'import sys; print(sys.version.split()[0])')"
step doctor sits doctor
step capture sits capture --to-kms --device /dev/video0 --card /dev/dri/card0 --format XR24 \
    --size "${SMOKE_SIZE:-640x480}" --frames "${SMOKE_FRAMES:-60}" --verify --verify-every 5 --json
# SITS_IN_VM: the tests run here, not replayed into another VM (tests/vm_plugin.py)
step probe env SITS_IN_VM=1 python3 -m pytest -p no:cacheprovider -q -rs --durations=5 \
    tests/vm/test_ebpf_vm.py tests/vm/test_doctor_vm.py tests/bpf/test_doctor_bpf.py
