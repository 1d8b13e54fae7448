# Runs inside the VM as root (vng --exec), read from the host's read-only root.
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
nodes="/dev/video0 /dev/video1 /dev/dri/card0 /dev/udmabuf /dev/dma_heap/system"
i=0
while :; do
    missing=
    for n in $nodes; do [ -e "$n" ] || missing="$missing $n"; done
    [ -z "$missing" ] && break
    i=$((i + 1))
    [ $i -ge 50 ] && fail "missing device nodes:$missing"
    sleep 0.2
done

. "$job/job.sh" || fail "cannot read $job/job.sh"
cd "$cwd" || fail "cannot cd to $cwd"
say run
"$@" 2>&1
rc=$?
say "exit $rc"
exit $rc
