# Runs inside the VM as root (vng --exec), read from the host's read-only root
# (at /host on a foreign root filesystem: tools/vm/run --arch arm64).
# Usage: sh guest-init.sh JOB_DIR VKMS_KO
# JOB_DIR/job.sh (written by sitsvm.py) sets `cwd`, exports the environment
# and `set --` the command. It lives in a file because vng passes --exec on the
# kernel command line, which holds only 2048 bytes.
#
# Protocol with sitsvm.py: our own messages go to stderr, which the host reads
# together with the kernel console; the command's stdout+stderr go to stdout.
#   sits-vm-guest: up | run | exit N | setup failed: WHY

job=$1
vkms=$2
say() { echo "sits-vm-guest: $*" >&2; }
fail() { say "setup failed: $*"; exit 125; }
say up

# On a foreign root filesystem (tools/vm/sitsvm.py, `mounts`), before any
# modprobe: the kernel's modules linked from the host's root (at /host), the
# --rwdir mounts bound where /host shows their directories, and sits' build
# for this architecture laid over the repo's sits/ (the objects beside it
# are the host's).
if [ -f "$job/mounts" ]; then
    while read -r kind src dst; do
        case $kind in
        link) out=$(ln -sfn "$src" "$dst" 2>&1) ;;
        bind) out=$(mount --bind "$src" "$dst" 2>&1) ;;
        overlay) out=$(mount -t overlay -o "lowerdir=$src:$dst" sits-build "$dst" 2>&1) ;;
        *) out="unknown kind"; false ;;
        esac || fail "mount $kind $src $dst: $out"
    done <"$job/mounts"
fi

# vkms is built out of tree (Debian has no vkms); its dependencies are not.
modprobe drm_shmem_helper && modprobe drm_kms_helper || fail "modprobe drm helpers"
out=$(insmod "$vkms" enable_writeback=1 enable_overlay=1 2>&1) || fail "insmod $vkms: $out"
# Capture + output nodes only, at fixed numbers: /dev/video0 captures,
# /dev/video1 is the output. No vbi/radio/sdr/fb nodes to confuse tests.
out=$(modprobe vivid n_devs=1 node_types=0x101 vid_cap_nr=0 vid_out_nr=1 2>&1) || fail "modprobe vivid: $out"
# udmabuf is built into the Debian kernel; a module only on other builds.
[ -e /dev/udmabuf ] || modprobe udmabuf 2>/dev/null
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug || fail "mount debugfs"
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing || fail "mount tracefs"

# devtmpfs creates the nodes while the drivers probe; give them up to 10 s.
nodes="/dev/video0 /dev/video1 /dev/dri/card0 /dev/udmabuf"
# The system dma-heap where the kernel has heaps (their class exists from
# boot): Debian's arm64 6.12 is built without CONFIG_DMABUF_HEAPS.
[ -d /sys/class/dma_heap ] && nodes="$nodes /dev/dma_heap/system"
i=0
while :; do
    missing=
    for n in $nodes; do [ -e "$n" ] || missing="$missing $n"; done
    [ -z "$missing" ] && break
    i=$((i + 1))
    [ $i -ge 50 ] && fail "missing device nodes:$missing"
    sleep 0.2
done

# What a stalled guest can say (sitsvm.py asks through the QEMU monitor when
# the command has been silent too long): every sysrq key, and an NMI from
# the host is a panic with the stack of each CPU.
echo 1 >/proc/sys/kernel/sysrq
[ -w /proc/sys/kernel/unknown_nmi_panic ] && echo 1 >/proc/sys/kernel/unknown_nmi_panic
[ -w /proc/sys/kernel/panic_print ] && echo 64 >/proc/sys/kernel/panic_print   # all CPUs' backtraces

# v4l2loopback (an MJPEG camera; tools/vm/setup builds it beside vkms) is
# loaded by the tests that want it (tests/vm/loopback.py), not here.
lb=$(dirname "$vkms")/v4l2loopback.ko
[ -f "$lb" ] && export SITS_VM_V4L2LOOPBACK="$lb"

. "$job/job.sh" || fail "cannot read $job/job.sh"
cd "$cwd" || fail "cannot cd to $cwd"
say run
"$@" 2>&1
rc=$?
say "exit $rc"
exit $rc
