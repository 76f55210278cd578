#pragma once
// The marginals' downward pass with a GPU (engine/posterior.hpp): after an upward pass that left
// its bucket outputs on the device (engine/plan.hpp DeviceOutputs), the buckets are visited root
// first, each where the upward pass ran it (the same cost model placed both steps: a bucket's
// downward step is its upward work once per child and once more). On the GPU every message is a
// sum-product bucket run by its kernels; messages between a GPU bucket and a host one are copied
// across. A bucket's factors enter its messages grouped as the upward kernel takes them
// (gpu/merge_inputs.hpp: products of small factors, and of the smallest while there are more
// than a kernel takes). A GPU bucket whose messages still have no kernel runs on the host.
//
// The message from bucket b to its child c is the product of b's inputs other than c's own
// output (its factors, its other children's outputs, the message from above) summed onto c's
// output variables: a bucket over b's variables with c's output variables first, in c's order
// (the kernels sum the last variables), each input laid out in that order on the device
// (Context::permute) where its scope is not a subsequence of it. Leaving c's output out instead
// of dividing the belief by it gives the same message and needs no division by zero. Where no
// variable is summed (c's output covers b's variables) the message is the inputs added onto c's
// output table (Context::permute, then Context::fold). Where the outputs of two or more children
// (whose tables hold none of b's factors) have a union of at most 1/16 of b's states, one pass
// sums b's belief (all its inputs) onto that union, and each such child's message is the union
// summed onto its output and divided by that output (Context::divide; where the output is zero,
// -inf: every belief below the child is zero there whatever the message says): a pass over the
// union per child instead of one over the bucket. An eliminated variable's marginal comes from
// the bucket's belief over a child's output variables (the message to that child times the
// child's output: a table of the child's output size) where it is in such a child's output;
// the others' from their joint: one more message over the whole bucket per group of them within
// 4096 entries or, for more (a root eliminates all its variables, most of them in no child's
// output) in a bucket of 2^23 states or more of which they span at most a quarter, one message over
// the bucket onto up to 2^22 entries of their joint kept on the device, the groups' messages
// taken from that. Either is brought back to the host and summed onto each variable.
//
// The messages' launch plans are built beside the pass, in the order it queues them
// (scheduler/preparation.hpp).
//
// A factor the upward pass added into a held child's table (gpu/merge_inputs.hpp rule 3) is in
// that table: it enters b's other messages through it, and the message to that child gets it as
// an input of its own.
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/plan.hpp"
#include "gpu/device_api.hpp"

namespace kinfer::sched {

// Why bucket b's downward step cannot run on the GPU's kernels: empty when every message of
// its has a kernel (gpu::why_no_kernel; no device needed), with its factors grouped. The factors
// an upward kernel added into a held child's table are inputs of that child's message of their
// own: a message that then has more inputs than a kernel takes sends the bucket to the host when
// the pass runs.
std::string downward_why_not(const Plan& plan, int b);

// The buckets whose downward step runs on the GPU: those `placed` there by the upward pass
// whose messages all have kernels (the others' are logged with -v).
std::vector<char> downward_on_gpu(const Plan& plan, std::span<const char> placed);

// The device bytes the downward pass takes beside the tables the upward pass held: every
// message the GPU computes at once at most, and the largest GPU bucket's inputs twice (uploaded
// and laid out in a message's order) with its largest message.
double downward_device_bytes(const Plan& plan, std::span<const char> on_gpu);

// Runs the pass, root first: the buckets on_gpu (downward_on_gpu) on `ctx` (bound to the
// calling thread), the others by on_host(b) (engine/plan.hpp DeviceOutputs::downward: down[b]
// holds its message from above, copied back when the GPU computed it; a GPU bucket's message
// from a host parent is taken from down[b]). held[b] >= 0: bucket b's output is that table on
// the device (released once its parent's messages are computed, and set to -1; copied into
// up[b], without the factors folded into it, when its parent runs on the host); else its
// output is up[b] on the host. folded[b]: (factor position
// in b's factor list, position of the child in b's children) for each factor that was added
// into a held child's table. Sets joint[v], for every variable eliminated in a GPU bucket, to
// ln of its bucket's belief summed onto it over its reduced domain (as the host's step).
// Throws DeviceMemoryError when the device is full (what it allocated released).
void run_downward(gpu::Context& ctx, const Plan& plan, std::span<const char> on_gpu,
                  std::vector<gpu::Handle>& held,
                  std::span<const std::vector<std::pair<int, int>>> folded,
                  std::vector<LnTable>& up, std::vector<LnTable>& down,
                  std::vector<LnTable>& joint,
                  const std::function<void(int)>& on_host, int threads);

}  // namespace kinfer::sched
