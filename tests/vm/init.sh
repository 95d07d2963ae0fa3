#!/bin/busybox sh
# /init of the test VM's initramfs (see run-in-vm.sh): loads the modules,
# mounts the host's root read-only over 9p as the guest's root, a fresh
# ext4 at /tmp (the scratch disk, which holds the job), /proc, /sys, /dev,
# /dev/shm, and cgroup2 at /sys/fs/cgroup with every controller the kernel
# has; brings the loopback interface up (tests' host services listen
# there); then
# switches to that root and runs /tmp/vm-job.sh under bash (which reaps the
# job's orphans as init must).  The job's output goes to the second serial
# port, its status last ("VM-EXIT N"), its errors to the console (the
# first); then the VM powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ip link set lo up || echo "vm init: cannot bring lo up"
while read -r m; do
    insmod "/lib/modules/$m.ko" || echo "vm init: insmod $m failed"
done </lib/modules/order
r=/newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose hostroot $r || echo "vm init: 9p mount failed"
mount -t proc proc $r/proc
mount -t sysfs sys $r/sys
mount -t devtmpfs dev $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $r/dev/shm
mount -t tmpfs tmpfs $r/run
mount -t cgroup2 cgroup2 $r/sys/fs/cgroup
# the host's root again (not its submounts), for what the scratch /tmp
# covers (see run-in-vm.sh's job)
mkdir -p $r/run/host
mount -o bind $r $r/run/host
mount -t ext4 /dev/vda $r/tmp || echo "vm init: scratch disk mount failed"
chmod 1777 $r/tmp
exec switch_root $r /bin/bash -c 'PATH=/usr/sbin:/usr/bin:/sbin:/bin; stty -F /dev/ttyS1 raw -echo; /bin/bash /tmp/vm-job.sh >/dev/ttyS1 2>/dev/ttyS0 </dev/null & wait $!
echo "VM-EXIT $?" >/dev/ttyS1; echo o >/proc/sysrq-trigger; sleep 60'
