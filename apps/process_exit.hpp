#pragma once
// The end of a kinfer process that used the GPU. Its exit includes the CUDA driver's release of
// the device, ~0.1 s on an H100 machine (docs/performance.md), paid after
// the answer is out. leave_gpu_teardown_to_helper() hands that release to a helper process
// sharing this one's memory and descriptor table, so that this process ends at once: the helper
// holds the last references to the driver's descriptors and the memory, waits until this
// process has ended, and exits, which is when the kernel releases the device.
namespace kinfer::app {

// Flushes stdout and stderr, closes every descriptor but the GPU driver's (so that no reader of
// this process's output waits for the helper), starts the helper and ends the process with
// `status`. Returns (having done nothing) when it should not or cannot: no CUDA driver started
// in this process, under MPI, under a CUDA tool (compute-sanitizer, Nsight: they report at the
// context's teardown), with KINFER_EXIT=wait, when process 1 is not an init known to reap
// orphans (systemd, tini, ...: elsewhere each helper would be left a zombie; KINFER_EXIT=fast
// uses the helper anyway), or when the helper cannot be started. KINFER_EXIT=helper starts it
// even without a GPU (the tests check the exit this way).
void leave_gpu_teardown_to_helper(int status);

// On a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL), prints "kinfer: internal error (signal N)" and
// the raw stack addresses to stderr before the process dies of the signal as it would have, so
// that a report carries where it happened (addr2line -f -e kinfer ADDRESS resolves them).
void report_crashes();

}  // namespace kinfer::app
