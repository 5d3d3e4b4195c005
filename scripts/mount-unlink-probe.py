#!/usr/bin/env python3
"""Does removing a large file through `wb mount` stall other requests?

Usage: scripts/mount-unlink-probe.py MOUNTPOINT BACKING_DIR [SIZE_MIB]

Writes a file of SIZE_MIB (default 2048) straight into BACKING_DIR (not
through the cache), looks it up through the mount, then removes it through
the mount while another thread lists the mount's root and stats a small
file in a loop. Prints the unlink's latency and the loop's longest call:
freeing a large file's blocks (ext4 does it when its last descriptor
closes) must not hold up other requests. Run with `wb mount BACKING_DIR
MOUNTPOINT` serving; leaves nothing behind but the file `small`.
"""
import os
import sys
import threading
import time


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    mnt, backing = sys.argv[1], sys.argv[2]
    size_mib = int(sys.argv[3]) if len(sys.argv) == 4 else 2048
    big = os.path.join(backing, "big")
    with open(big, "wb") as f:
        chunk = b"\x5a" * (1 << 20)
        for _ in range(size_mib):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    with open(os.path.join(backing, "small"), "w") as f:
        f.write("x")
    os.stat(os.path.join(mnt, "big"))
    os.stat(os.path.join(mnt, "small"))
    stop = threading.Event()
    latencies = []

    def poll():
        while not stop.is_set():
            start = time.perf_counter()
            os.listdir(mnt)
            os.stat(os.path.join(mnt, "small"))
            latencies.append(time.perf_counter() - start)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.5)
    start = time.perf_counter()
    os.unlink(os.path.join(mnt, "big"))
    unlink_s = time.perf_counter() - start
    time.sleep(2.0)
    stop.set()
    poller.join()
    print(
        f"unlink {unlink_s * 1e3:.1f} ms; concurrent listdir+stat max "
        f"{max(latencies) * 1e3:.1f} ms over {len(latencies)} calls"
    )


if __name__ == "__main__":
    main()
