"""Does the image's DMA to the GPU take longer when the CPU has just written
it? (issue 46, part 4: the batch-1 CUDA graph's input phase over HTTP was
4-47 µs over the system shared-memory one in twelve servers of
gpu-batch1-wait, 30 at the median, though both copy a 301,056-byte image
to the device by one DMA from pinned memory.)

One difference between the two that no run has measured: how recently the
CPU wrote those bytes. An HTTP body is written by recv() into its pinned
block a moment before its copy; ptperf (and perf_analyzer) write a shared
-memory region's input once, at set-up, so its bytes left the CPU's caches
long before. A DMA read of lines still dirty in a CPU cache has to be
snooped out of it.

PyTorch alone, no ptserve; on the GPU host:

    python3 docs/experiments/gpu-batch1-dma/run.py [OUT_DIR]

Each arm copies 301,056 bytes host to device on one stream, CUDA events
right around the copy (the host's launch is the same call in every arm),
500 times after 50 unmeasured, and prints the median and 90th percentile
of the device's event-to-event time and of the host's launch:

- caching-allocator block (what a pinned body is: LibTorch's caching host
  allocator, cudaHostAlloc), not written between copies;
- the same block, rewritten by this thread just before each copy (a
  memcpy from another host buffer);
- the same block, filled by recv() from a loopback TCP socket just before
  each copy (what the HTTP frontend does), the sender a thread of this
  process (it shares the GIL) and then another process;
- the block cold, with a recv() of the same bytes into another (pageable)
  buffer just before: the system call without the block's bytes;
- a /dev/shm mapping registered with cudaHostRegister (what ptserve does
  with a system shared-memory region), not written between copies;
- the same mapping, rewritten just before each copy.
"""
import ctypes
import mmap
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

import torch

N = 301056
REPS, WARM = 500, 50


def measure(src, dev, before):
    """Device µs between events around the copy; host µs of the launch."""
    dev_us, host_us = [], []
    for i in range(WARM + REPS):
        before()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        dev.copy_(src, non_blocking=True)
        host = (time.perf_counter() - t) * 1e6
        b.record()
        b.synchronize()
        if i >= WARM:
            dev_us.append(a.elapsed_time(b) * 1000)
            host_us.append(host)
    return dev_us, host_us


def pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    tx = socket.create_connection(srv.getsockname())
    rx, _ = srv.accept()
    srv.close()
    return tx, rx


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else None
    payload0 = os.urandom(N)
    kick_r, kick_w = os.pipe()
    tx_p, rx_p = pair()
    if os.fork() == 0:  # the sender process: one image per byte on the pipe
        os.close(kick_w)  # so that the parent's exit ends the pipe, and this loop
        while os.read(kick_r, 1):
            tx_p.sendall(payload0)
        os._exit(0)
    dev = torch.empty(N, dtype=torch.uint8, device="cuda")
    other = torch.randint(0, 255, (N,), dtype=torch.uint8)  # pageable source of rewrites

    block = torch.empty(N, dtype=torch.uint8).pin_memory()
    block.copy_(other)
    block_view = (ctypes.c_ubyte * N).from_address(block.data_ptr())

    # Loopback pairs: a sender writes one image per request; the copy's
    # thread receives it straight into the pinned block (or, for the
    # control arm, into a pageable buffer, leaving the block cold). The
    # first sender is a thread of this process, whose GIL it shares; the
    # second a forked process (forked before CUDA starts), so that the
    # launch is not held up by the sender's return to Python.
    payload = bytes(other.numpy())

    tx_t, rx_t = pair()
    go = threading.Semaphore(0)

    def sender():
        while go.acquire():
            tx_t.sendall(payload)
    threading.Thread(target=sender, daemon=True).start()

    def receive(rx, buf):
        mv, got = memoryview(buf).cast("B"), 0
        while got < N:
            got += rx.recv_into(mv[got:], N - got)

    def recv_thread():
        go.release()
        receive(rx_t, block_view)

    def recv_process(buf):
        def run():
            os.write(kick_w, b"x")
            receive(rx_p, buf)
        return run
    elsewhere = bytearray(N)

    fd, path = tempfile.mkstemp(dir="/dev/shm")
    os.ftruncate(fd, N)
    region = mmap.mmap(fd, N)
    shm = torch.frombuffer(region, dtype=torch.uint8)
    shm.copy_(other)
    rc = torch.cuda.cudart().cudaHostRegister(shm.data_ptr(), N, 0)
    if int(rc) != 0:
        sys.exit("cudaHostRegister failed: %s" % rc)

    def nothing():
        pass

    arms = [
        ("caching-allocator block, cold", block, nothing),
        ("caching-allocator block, memcpy just before", block, lambda: block.copy_(other)),
        ("caching-allocator block, recv() just before, sender a thread", block, recv_thread),
        ("caching-allocator block, recv() just before, sender a process", block,
         recv_process(block_view)),
        ("caching-allocator block, cold, recv() elsewhere just before", block,
         recv_process(elsewhere)),
        ("registered /dev/shm region, cold", shm, nothing),
        ("registered /dev/shm region, memcpy just before", shm, lambda: shm.copy_(other)),
    ]
    rows = []
    for rnd in range(2):  # two rounds, arms interleaved, to see drift
        for name, src, before in arms:
            d, hst = measure(src, dev, before)
            rows.append((rnd + 1, name, statistics.median(d), pct(d, 0.9),
                         statistics.median(hst), pct(hst, 0.9)))
            print("round %d  %-62s device p50 %6.1f p90 %6.1f  launch p50 %5.1f p90 %5.1f"
                  % rows[-1], flush=True)
    torch.cuda.cudart().cudaHostUnregister(shm.data_ptr())
    os.unlink(path)  # the mapping goes with the process
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "dma.md"), "w") as f:
            f.write("%s, torch %s, %d bytes, %d copies per row (after %d)\n\n"
                    % (torch.cuda.get_device_name(), torch.__version__, N, REPS, WARM))
            f.write("| round | source | device µs p50 | p90 | launch µs p50 | p90 |\n")
            f.write("|---|---|---:|---:|---:|---:|\n")
            for r in rows:
                f.write("| %d | %s | %.1f | %.1f | %.1f | %.1f |\n" % r)


if __name__ == "__main__":
    main()
