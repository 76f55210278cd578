#include "scheduler/downward.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include "engine/model.hpp"       // table_size
#include "gpu/merge_inputs.hpp"   // kFoldMaxVars, merge_plan
#include "gpu/random_bucket.hpp"  // bucket_spec
#include "scheduler/preparation.hpp"

namespace kinfer::sched {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The largest table of a message onto a group of a bucket's eliminated variables (their joint),
// and of a joint kept on the device to take such messages from (a pass over it instead of one
// over the bucket for each).
constexpr std::int64_t kJointEntries = 4096, kJointDevice = std::int64_t{1} << 22;

// A union message (child_groups) has at most this share of its bucket's states: each message
// taken from it is a pass over the union instead of one over the bucket.
constexpr double kUnionShare = 1.0 / 16;

// An input of a bucket's messages.
struct Source {
  enum Kind { factor, product, child, above } kind;
  int index = -1;  // factor: the model's factor; child: the position in the bucket's children
  std::vector<int> scope;
  int only_for = -1;  // a factor folded into this child's held table: an input of its message only
  std::vector<int> factors;  // product: the model's factors multiplied together (scope: theirs)
};

// One message of a bucket: onto a child's output variables (`child`, its position), from the
// sources that enter it or (`from_union`) from a union message; a union message (`group`, the
// children it serves; child -1): the bucket's belief, all its sources, summed onto the union of
// those children's output variables, or (`union_of_eliminated`) onto eliminated variables that
// no child has; or onto some of the bucket's eliminated variables (child -1): from all the
// bucket's sources (their joint), from such a union message, or from the bucket's belief over a
// child's output variables (`from_child`: the message to that child times the child's output,
// the two inputs in `scopes`).
struct Message {
  int child = -1;
  int from_child = -1;
  int from_union = -1;                   // the index of the union message it is taken from
  bool union_of_eliminated = false;
  std::vector<int> group;                // a union message: the children it serves
  BucketShape shape;                     // the target's variables first, then the rest
  std::vector<int> sources;              // positions in the bucket's sources
  std::vector<std::vector<int>> scopes;  // each source's scope in the shape's order
};

std::vector<int> cards_of(const std::vector<int>& vars, const std::vector<int>& card) {
  std::vector<int> c;
  for (int v : vars) c.push_back(card[v]);
  return c;
}

// The bucket's sources: its factors (but those in `folded`, which are inside held children's
// tables and enter only their own child's message), its children's outputs, the message from
// above (not at the root). The other factors are grouped as the upward pass's kernel groups
// them (gpu/merge_inputs.hpp: small products, and the smallest multiplied together while the
// bucket has more than a kernel takes), each group of several one source: their product.
std::vector<Source> sources_of(const Plan& plan, int b,
                               std::span<const std::pair<int, int>> folded) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<int> into(bk.factors.size(), -1);
  for (auto [k, ci] : folded) into.at(k) = ci;
  std::vector<Source> src;
  std::vector<int> free;  // factors not folded
  std::vector<std::vector<int>> free_scopes, child_scopes;
  for (std::size_t k = 0; k < bk.factors.size(); ++k) {
    const int f = bk.factors[k];
    if (into[k] >= 0) {
      src.push_back({Source::factor, f, plan.input_scope[f], into[k], {}});
    } else {
      free.push_back(f);
      free_scopes.push_back(plan.input_scope[f]);
    }
  }
  for (int c : bk.children) child_scopes.push_back(plan.tree.buckets[c].output_vars());
  const gpu::MergePlan merged = gpu::merge_plan(bucket_shape(plan, b), free_scopes, child_scopes);
  for (std::size_t g = 0; g < merged.groups.size(); ++g) {
    if (merged.groups[g].size() == 1) {
      const int f = free[merged.groups[g][0]];
      src.push_back({Source::factor, f, plan.input_scope[f], -1, {}});
      continue;
    }
    Source x{Source::product, -1, merged.scopes[g], -1, {}};
    for (int k : merged.groups[g]) x.factors.push_back(free[k]);
    src.push_back(std::move(x));
  }
  for (std::size_t ci = 0; ci < bk.children.size(); ++ci)
    src.push_back({Source::child, static_cast<int>(ci),
                   plan.tree.buckets[bk.children[ci]].output_vars(), -1, {}});
  if (bk.parent >= 0) src.push_back({Source::above, -1, bk.output_vars(), -1, {}});
  return src;
}

// A sum over the variables `over` onto `target` (a subset of them): target's variables first,
// then the others in over's order, those summed.
BucketShape shape_onto(const std::vector<int>& target, const std::vector<int>& over,
                       const std::vector<int>& card) {
  BucketShape shape;
  shape.vars = target;
  for (int v : over)
    if (std::find(target.begin(), target.end(), v) == target.end()) shape.vars.push_back(v);
  shape.n_marg = static_cast<int>(over.size() - target.size());
  shape.card = cards_of(shape.vars, card);
  return shape;
}

// The message onto `target` taken from a union message's table (at position `from_union`, over
// the variables `over`): its one input.
Message message_from_union(const Plan& plan, const std::vector<int>& target,
                           const std::vector<int>& over, int child, int from_union) {
  Message d;
  d.child = child;
  d.from_union = from_union;
  d.shape = shape_onto(target, over, plan.model.card);
  d.scopes = {d.shape.vars};
  return d;
}

// The message of bucket b onto `target` (a subsequence of its variables) from the sources that
// enter it.
Message message_onto(const Plan& plan, int b, const std::vector<int>& target, int child,
                     const std::vector<Source>& src) {
  const Bucket& bk = plan.tree.buckets[b];
  Message m;
  m.child = child;
  m.shape = shape_onto(target, bk.vars, plan.model.card);
  for (std::size_t s = 0; s < src.size(); ++s) {
    const Source& x = src[s];
    const bool enters = child < 0 ? x.only_for < 0
                                  : !(x.kind == Source::child && x.index == child) &&
                                        (x.only_for < 0 || x.only_for == child);
    if (!enters) continue;
    m.sources.push_back(static_cast<int>(s));
    std::vector<int> scope;
    for (int v : m.shape.vars)
      if (std::find(x.scope.begin(), x.scope.end(), v) != x.scope.end()) scope.push_back(v);
    m.scopes.push_back(std::move(scope));
  }
  return m;
}

// The messages onto the eliminated variables from the bucket's belief over its children's
// outputs: each eliminated variable from the child of smallest output that has it, among the
// children whose table holds none of the bucket's factors (a factor folded into a held child's
// table is in that child's message too). The variables in no such child's output, or whose
// child's message would have no kernel, are left in `rest`: the joint messages take them.
std::vector<Message> messages_from_children(const Plan& plan, int b, const std::vector<Source>& src,
                                            std::vector<int>& rest) {
  const Bucket& bk = plan.tree.buckets[b];
  const auto& card = plan.model.card;
  const std::vector<int> elim(bk.vars.end() - bk.n_marg, bk.vars.end());
  std::vector<char> usable(bk.children.size(), 1);
  for (const Source& x : src)
    if (x.only_for >= 0) usable[x.only_for] = 0;
  std::vector<int> via(elim.size(), -1);
  for (std::size_t k = 0; k < elim.size(); ++k)
    for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
      const std::vector<int> out = plan.tree.buckets[bk.children[ci]].output_vars();
      if (!usable[ci] || std::find(out.begin(), out.end(), elim[k]) == out.end()) continue;
      if (via[k] < 0 || table_size(out, card) <
                            table_size(plan.tree.buckets[bk.children[via[k]]].output_vars(), card))
        via[k] = static_cast<int>(ci);
    }
  std::vector<Message> msg;
  for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
    if (std::find(via.begin(), via.end(), static_cast<int>(ci)) == via.end()) continue;
    const std::vector<int> out = plan.tree.buckets[bk.children[ci]].output_vars();
    std::vector<int> onto;
    for (int v : out) {
      const auto at = std::find(elim.begin(), elim.end(), v);
      if (at != elim.end() && via[at - elim.begin()] == static_cast<int>(ci)) onto.push_back(v);
    }
    Message m;
    m.from_child = static_cast<int>(ci);
    m.shape = shape_onto(onto, out, card);
    m.scopes = {m.shape.vars, m.shape.vars};
    if (table_size(onto, card) > kJointEntries ||
        static_cast<int>(out.size()) > gpu::kFoldMaxVars ||
        (m.shape.n_marg > 0 && !gpu::why_no_kernel(m.shape, m.scopes).empty())) {
      for (int v : onto) via[std::find(elim.begin(), elim.end(), v) - elim.begin()] = -1;
      continue;
    }
    msg.push_back(std::move(m));
  }
  rest.clear();
  for (std::size_t k = 0; k < elim.size(); ++k)
    if (via[k] < 0) rest.push_back(elim[k]);
  return msg;
}

// Children of bucket b whose messages come from one pass over the bucket (a union message) and
// a pass over its output each: groups of two or more whose output variables' union has at most
// kUnionShare of the bucket's states. A child whose table holds factors of b (folded into it by
// the upward kernel) is in none: the belief divided by its table would lack those factors, which
// its message has. Greedy, largest output first, each child into the group whose union it grows
// least, else a group of its own; the groups are formed before such children leave them, so
// that a union is never larger than the one downward_device_bytes counted (which knows no
// folded factors).
std::vector<std::vector<int>> child_groups(const Plan& plan, int b,
                                           const std::vector<Source>& src) {
  const Bucket& bk = plan.tree.buckets[b];
  const auto& card = plan.model.card;
  const int nc = static_cast<int>(bk.children.size());
  if (nc < 2) return {};
  std::vector<char> usable(nc, 1);
  for (const Source& x : src)
    if (x.only_for >= 0) usable[x.only_for] = 0;
  // Each child's output variables as positions in the bucket's, and a union's states.
  std::vector<std::vector<char>> in(nc, std::vector<char>(bk.vars.size(), 0));
  for (int ci = 0; ci < nc; ++ci)
    for (int v : plan.tree.buckets[bk.children[ci]].output_vars())
      in[ci][std::find(bk.vars.begin(), bk.vars.end(), v) - bk.vars.begin()] = 1;
  const auto states = [&](const std::vector<char>& over) {
    double s = 1;
    for (std::size_t k = 0; k < over.size(); ++k)
      if (over[k]) s *= card[bk.vars[k]];
    return s;
  };
  const double line = kUnionShare * std::exp2(bk.log2_states);
  std::vector<int> by_size;
  for (int ci = 0; ci < nc; ++ci)
    if (states(in[ci]) <= line) by_size.push_back(ci);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int x, int y) { return states(in[x]) > states(in[y]); });
  std::vector<std::vector<int>> groups;
  std::vector<std::vector<char>> unions;
  for (int ci : by_size) {
    int best = -1;
    double best_states = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::vector<char> u = unions[g];
      for (std::size_t k = 0; k < u.size(); ++k) u[k] |= in[ci][k];
      const double s = states(u);
      if (s <= line && (best < 0 || s < best_states)) best = static_cast<int>(g), best_states = s;
    }
    if (best < 0) {
      groups.push_back({ci});
      unions.push_back(in[ci]);
      continue;
    }
    groups[best].push_back(ci);
    for (std::size_t k = 0; k < bk.vars.size(); ++k) unions[best][k] |= in[ci][k];
  }
  for (std::vector<int>& g : groups) std::erase_if(g, [&](int ci) { return !usable[ci]; });
  std::erase_if(groups, [](const std::vector<int>& g) { return g.size() < 2; });
  return groups;
}

// The union message of `group` and the messages to its children from it, each the union summed
// onto the child's output variables (the union's other variables last); empty when a kernel
// takes one of them not.
std::vector<Message> union_messages(const Plan& plan, int b, const std::vector<int>& group,
                                    const std::vector<Source>& src, int at) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<std::vector<int>> outs;
  for (int ci : group) outs.push_back(plan.tree.buckets[bk.children[ci]].output_vars());
  std::vector<int> w;  // the union, in the bucket's order
  for (int v : bk.vars)
    if (std::any_of(outs.begin(), outs.end(), [v](const std::vector<int>& o) {
          return std::find(o.begin(), o.end(), v) != o.end();
        }))
      w.push_back(v);
  if (static_cast<int>(w.size()) > gpu::kFoldMaxVars) return {};
  std::vector<Message> msg{message_onto(plan, b, w, -1, src)};
  msg[0].group = group;
  if (msg[0].shape.n_marg == 0 || !gpu::why_no_kernel(msg[0].shape, msg[0].scopes).empty())
    return {};
  for (std::size_t k = 0; k < group.size(); ++k) {
    Message d = message_from_union(plan, outs[k], w, group[k], at);
    if (d.shape.n_marg > 0 && !gpu::why_no_kernel(d.shape, d.scopes).empty()) return {};
    msg.push_back(std::move(d));
  }
  return msg;
}

// `vars` in groups of consecutive variables, each as many as keep a table within `entries`.
std::vector<std::vector<int>> consecutive_groups(const Plan& plan, const std::vector<int>& vars,
                                                 std::int64_t entries) {
  std::vector<std::vector<int>> groups;
  std::int64_t size = 1;
  for (int v : vars) {
    const int c = plan.model.card[v];
    if (groups.empty() || size * c > entries) groups.emplace_back(), size = 1;
    groups.back().push_back(v);
    size *= c;
  }
  return groups;
}

std::vector<Message> messages_of(const Plan& plan, int b, const std::vector<Source>& src) {
  const Bucket& bk = plan.tree.buckets[b];
  std::vector<Message> msg;
  std::vector<char> served(bk.children.size(), 0);
  for (const std::vector<int>& group : child_groups(plan, b, src)) {
    std::vector<Message> u = union_messages(plan, b, group, src, static_cast<int>(msg.size()));
    for (Message& m : u) {
      if (m.from_union >= 0) served[m.child] = 1;
      msg.push_back(std::move(m));
    }
  }
  for (std::size_t ci = 0; ci < bk.children.size(); ++ci)
    if (!served[ci])
      msg.push_back(message_onto(plan, b, plan.tree.buckets[bk.children[ci]].output_vars(),
                                 static_cast<int>(ci), src));
  // The eliminated variables from the children's beliefs, each a table of a child's output
  // size, where they can: a joint message reads the bucket's whole state space.
  std::vector<int> rest;
  for (Message& m : messages_from_children(plan, b, src, rest)) msg.push_back(std::move(m));
  // The others' joint (a root bucket eliminates all its variables, most of them in no child's
  // output): in parts of as many consecutive variables as keep a table within kJointDevice,
  // their groups within kJointEntries each one message over the bucket; or, where a part takes
  // g >= 2 groups and has at most a quarter of the states of a bucket of at least
  // kJointKeptStates, one message over the bucket onto the part, kept on the device (a union
  // message), and the groups' messages from it, each a pass over the part's table: at most
  // 1 + g / 4 passes' work instead of g. (At 2^23 states a pass over the bucket costs about what
  // the kept joint's extra launches and layouts cost on an H200.)
  constexpr double kJointKeptStates = 1 << 23, kJointKeptShare = 0.25;
  const double bucket_states = std::exp2(bk.log2_states);
  for (const std::vector<int>& part : consecutive_groups(plan, rest, kJointDevice)) {
    const std::vector<std::vector<int>> groups = consecutive_groups(plan, part, kJointEntries);
    if (groups.size() >= 2 && bucket_states >= kJointKeptStates &&
        static_cast<double>(table_size(part, plan.model.card)) <= kJointKeptShare * bucket_states) {
      Message u = message_onto(plan, b, part, -1, src);
      u.union_of_eliminated = true;
      if (gpu::why_no_kernel(u.shape, u.scopes).empty()) {
        const int at = static_cast<int>(msg.size());
        msg.push_back(std::move(u));
        for (const std::vector<int>& g : groups)
          msg.push_back(message_from_union(plan, g, part, -1, at));
        continue;
      }
    }
    for (const std::vector<int>& g : groups) msg.push_back(message_onto(plan, b, g, -1, src));
  }
  return msg;
}

// The stride of each of `vars` in a table over `scope` (row-major, last fastest); 0 for a
// variable it lacks.
std::vector<std::int64_t> strides_in(const std::vector<int>& vars, const std::vector<int>& scope,
                                     const std::vector<int>& card) {
  std::vector<std::int64_t> st(vars.size(), 0);
  std::int64_t s = 1;
  for (std::size_t k = scope.size(); k-- > 0;) {
    const auto at = std::find(vars.begin(), vars.end(), scope[k]);
    if (at != vars.end()) st[at - vars.begin()] = s;
    s *= card[scope[k]];
  }
  return st;
}

// Child ci of bucket b, held on the device as `table`, copied into `to` without the factors of
// b the upward pass added into it (`folded`), for b's step on the host, which takes b's every
// factor. Where such a factor is -inf the entry stays -inf (the step's product has that factor).
void copy_back_unfolded(gpu::Context& ctx, const Plan& plan, int b, int ci, gpu::Handle table,
                        std::span<const std::pair<int, int>> folded, LnTable& to) {
  const Bucket& bk = plan.tree.buckets[b];
  const auto& card = plan.model.card;
  const std::vector<int> scope = plan.tree.buckets[bk.children[ci]].output_vars();
  const std::int64_t n = table_size(scope, card);
  to.resize(n);
  ctx.download_range(table, 0, n, to.data(), 0);
  for (auto [k, into] : folded) {
    if (into != ci) continue;
    const int f = bk.factors[k];
    const std::vector<std::int64_t> st = strides_in(scope, plan.input_scope[f], card);
    const std::vector<double>& factor = plan.input_data[f];
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t rest = i, at = 0;
      for (std::size_t v = scope.size(); v-- > 0;) {
        at += (rest % card[scope[v]]) * st[v];
        rest /= card[scope[v]];
      }
      if (factor[at] != kNegInf) to[i] -= factor[at];
    }
  }
}

// The device tables the pass owns, released when it ends or fails.
class Tables {
 public:
  explicit Tables(gpu::Context& ctx) : ctx_(ctx) {}
  ~Tables() {
    for (gpu::Handle h : live_) try {
        ctx_.release(h);
      } catch (...) {  // a destructor must not throw; the first error is the one reported
      }
  }
  gpu::Handle alloc(std::int64_t n) {
    const gpu::Handle h = ctx_.alloc(std::max<std::int64_t>(n, 1));
    live_.push_back(h);
    return h;
  }
  void release(gpu::Handle h) {
    const auto it = std::find(live_.begin(), live_.end(), h);
    if (it == live_.end()) return;
    live_.erase(it);
    ctx_.release(h);
  }

 private:
  gpu::Context& ctx_;
  std::vector<gpu::Handle> live_;
};

}  // namespace

std::string downward_why_not(const Plan& plan, int b) {
  const std::vector<Source> src = sources_of(plan, b, {});
  for (const Message& m : messages_of(plan, b, src)) {
    for (const auto& s : m.scopes)
      if (static_cast<int>(s.size()) > gpu::kFoldMaxVars)
        return "an input over more than " + std::to_string(gpu::kFoldMaxVars) + " variables";
    if (m.shape.n_marg == 0) {
      if (static_cast<int>(m.shape.vars.size()) > gpu::kFoldMaxVars)
        return "a message over more than " + std::to_string(gpu::kFoldMaxVars) + " variables";
      continue;
    }
    std::string why = gpu::why_no_kernel(m.shape, m.scopes);
    if (!why.empty()) return why;
  }
  return {};
}

std::vector<char> downward_on_gpu(const Plan& plan, std::span<const char> placed) {
  std::vector<char> on(placed.begin(), placed.end());
  for (std::size_t b = 0; b < on.size(); ++b) {
    if (!on[b]) continue;
    const std::string why = downward_why_not(plan, static_cast<int>(b));
    if (why.empty()) continue;
    on[b] = 0;
    spdlog::debug("downward pass: bucket {} on the host: {}", b, why);
  }
  return on;
}

double downward_device_bytes(const Plan& plan, std::span<const char> on_gpu) {
  const auto& buckets = plan.tree.buckets;
  const auto& card = plan.model.card;
  double messages = 0, largest = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bk = buckets[b];
    const double out = static_cast<double>(table_size(bk.output_vars(), card));
    if (bk.parent >= 0 && on_gpu[bk.parent]) messages += out;
    if (!on_gpu[b]) continue;
    double in = out;  // the message from above
    double biggest = 0, union_entries = 0;
    const std::vector<Source> src = sources_of(plan, static_cast<int>(b), {});
    for (const Source& x : src)
      if (x.kind == Source::factor || x.kind == Source::product)
        in += static_cast<double>(table_size(x.scope, card));
    for (const Message& m : messages_of(plan, static_cast<int>(b), src))
      if (!m.group.empty() || m.union_of_eliminated)
        union_entries = std::max(union_entries, static_cast<double>(m.shape.output_size()));
    for (int c : bk.children) {
      const double n = static_cast<double>(table_size(buckets[c].output_vars(), card));
      in += n;
      biggest = std::max(biggest, n);
    }
    const std::vector<int> elim(bk.vars.end() - bk.n_marg, bk.vars.end());
    std::int64_t joint = std::min(table_size(elim, card), kJointEntries);  // its largest group's
    for (int v : elim) joint = std::max<std::int64_t>(joint, card[v]);
    biggest = std::max(biggest, static_cast<double>(joint));
    // A union message's table and its copy laid out in a child message's order.
    largest = std::max(largest, 2 * in + biggest + 2 * union_entries);
  }
  return 8.0 * (messages + largest);
}

void run_downward(gpu::Context& ctx, const Plan& plan, std::span<const char> on_gpu,
                  std::vector<gpu::Handle>& held,
                  std::span<const std::vector<std::pair<int, int>>> folded,
                  std::vector<LnTable>& up, std::vector<LnTable>& down,
                  std::vector<LnTable>& joint,
                  const std::function<void(int)>& on_host, int threads) {
  const auto& buckets = plan.tree.buckets;
  const auto& card = plan.model.card;
  const int nb = static_cast<int>(buckets.size());
  std::vector<std::vector<Source>> src(nb);
  std::vector<std::vector<Message>> msg(nb);
  std::vector<std::pair<int, int>> kernels;  // (bucket, message) run by a kernel
  // The factors the upward kernel added into held children stay apart from the others' products
  // (each enters one message only): a message that then has more inputs than a kernel takes
  // sends its bucket to the host (downward_on_gpu judged it with every factor grouped).
  std::vector<char> gpu_step(on_gpu.begin(), on_gpu.end());
  for (int b = 0; b < nb; ++b) {
    if (!gpu_step[b]) continue;
    src[b] = sources_of(plan, b, folded[b]);
    msg[b] = messages_of(plan, b, src[b]);
    for (const Message& m : msg[b])
      if (m.shape.n_marg > 0)
        if (const std::string why = gpu::why_no_kernel(m.shape, m.scopes); !why.empty()) {
          spdlog::debug("downward pass: bucket {} on the host: {}", b, why);
          gpu_step[b] = 0;
        }
    if (!gpu_step[b]) src[b].clear(), msg[b].clear();
  }
  // The messages run by kernels in the order the pass queues them (root first).
  std::vector<std::vector<int>> kernel_at(nb);  // [b][message]: its position in `kernels`, or -1
  for (int b = nb - 1; b >= 0; --b) {
    kernel_at[b].assign(msg[b].size(), -1);
    for (std::size_t k = 0; k < msg[b].size(); ++k)
      if (msg[b][k].shape.n_marg > 0) {
        kernel_at[b][k] = static_cast<int>(kernels.size());
        kernels.emplace_back(b, static_cast<int>(k));
      }
  }
  using clock = std::chrono::steady_clock;
  const auto since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  const auto t0 = clock::now();
  // With -v, each bucket and each message is waited for, to report the slowest (their times
  // then add up to the pass's).
  const bool timed = spdlog::should_log(spdlog::level::debug);
  std::vector<std::pair<double, int>> slowest;
  // With -v: the slowest messages and permutes (each waited for), the time in host and GPU
  // buckets, the host time allocating device tables.
  std::vector<std::pair<double, std::string>> slow_messages, permute_log;
  double alloc_total = 0, host_seconds = 0, gpu_seconds = 0;
  // The kernels' launch plans (the selector's work, once per shape), built beside the pass in the
  // order it queues them: the GPU starts on the first messages at once instead of after all the
  // plans. Half the threads build them (the pass's own thread runs host buckets' steps on all of
  // them meanwhile). Their tables are uploaded on a stream of their own (a copy from pageable
  // memory waits for the work queued on its stream), which the pass's stream waits for; the pass
  // builds a plan nobody has started itself and waits for one being built. With -v they are all
  // built first, so that each message's time is its own.
  const int upload_stream = ctx.num_streams() > 1 ? 1 : 0;
  Preparation prep(static_cast<int>(kernels.size()));
  const auto prepare = [&](int i) {
    prep.build(i, [&] {
      const Message& m = msg[kernels[i].first][kernels[i].second];
      ctx.prepare(m.shape, m.scopes, upload_stream);
    });
  };
  const int preparing = static_cast<int>(std::min<std::size_t>(
      std::max(1, (threads > 0 ? threads : omp_get_max_threads()) / 2), kernels.size()));
  const auto prepare_all = [&] {
#pragma omp parallel for schedule(dynamic, 1) num_threads(preparing)
    for (std::size_t i = 0; i < kernels.size(); ++i)
      if (!prep.failed()) prepare(static_cast<int>(i));
  };
  std::thread preparer;
  struct JoinPreparer {  // on every way out: what is left is not built, the threads joined
    Preparation& prep;
    std::thread& t;
    ~JoinPreparer() {
      prep.stop();
      if (t.joinable()) t.join();
    }
  } join_preparer{prep, preparer};
  if (timed) {
    prepare_all();
    prep.rethrow();
  } else if (!kernels.empty()) {
    preparer = std::thread(prepare_all);
  }
  const double prepared = since(t0);
  constexpr int kStream = 0;
  Tables tables(ctx);
  int permutes = 0;
  std::vector<gpu::Handle> from_above(nb, -1);
  std::vector<std::pair<gpu::Handle, const Message*>> joints;  // the messages onto eliminated
  std::vector<std::vector<double>> zeros;  // host sources of all-zero messages, kept to the end
  int on_host_buckets = 0;
  for (int b = nb - 1; b >= 0; --b) {
    const auto tb = clock::now();
    const Bucket& bk = buckets[b];
    if (!gpu_step[b]) {
      if (from_above[b] >= 0) {  // a GPU parent's message
        down[b].resize(table_size(bk.output_vars(), card));
        ctx.download_range(from_above[b], 0, static_cast<std::int64_t>(down[b].size()),
                           down[b].data(), kStream);
        tables.release(from_above[b]);
      }
      for (std::size_t ci = 0; ci < bk.children.size(); ++ci) {
        const int c = bk.children[ci];
        if (held[c] < 0) continue;
        copy_back_unfolded(ctx, plan, b, static_cast<int>(ci), held[c], folded[b], up[c]);
        ctx.release(held[c]);
        held[c] = -1;
      }
      on_host(b);
      ++on_host_buckets;
      if (timed) host_seconds += since(tb);
      continue;
    }
    // The sources on the device: uploaded factors and host outputs, held outputs, the message.
    std::vector<gpu::Handle> h(src[b].size(), -1), owned;
    std::vector<std::vector<double>> products;  // host tables of product sources, until uploaded
    for (std::size_t s = 0; s < src[b].size(); ++s) {
      const Source& x = src[b][s];
      const double* host = nullptr;
      if (x.kind == Source::above && from_above[b] >= 0) {
        h[s] = from_above[b];
        owned.push_back(h[s]);
        continue;
      }
      if (x.kind == Source::child) {
        const int c = bk.children[x.index];
        if (held[c] >= 0) {
          h[s] = held[c];
          continue;
        }
        host = up[c].data();
      } else if (x.kind == Source::above) {  // a host parent's message
        host = down[b].data();
      } else if (x.kind == Source::product) {  // the CPU kernel with nothing summed
        BucketShape over;
        over.vars = x.scope;
        over.card = cards_of(x.scope, card);
        std::vector<InputTable> in;
        for (int f : x.factors) in.push_back({plan.input_data[f].data(), plan.input_scope[f]});
        products.emplace_back(table_size(x.scope, card));
        sum_product_log(over, in, products.back().data(), 1);
        host = products.back().data();
      } else {
        host = plan.input_data[x.index].data();
      }
      const std::int64_t n = table_size(x.scope, card);
      h[s] = tables.alloc(n);
      owned.push_back(h[s]);
      ctx.upload(h[s], host, n, kStream);
    }
    // The union messages' tables and their variables, while their children's messages use them.
    std::vector<gpu::Handle> unions(msg[b].size(), -1);
    std::vector<std::vector<int>> union_vars(msg[b].size());
    // The position of child ci's output among the bucket's sources.
    const auto child_source = [&](int ci) {
      for (std::size_t s = 0; s < src[b].size(); ++s)
        if (src[b][s].kind == Source::child && src[b][s].index == ci) return s;
      throw std::logic_error("downward pass: a child without its output among the sources");
    };
    for (std::size_t k = 0; k < msg[b].size(); ++k) {
      const Message& m = msg[b][k];
      if (timed) ctx.synchronize(kStream);
      const auto tm = clock::now();
      int laid = 0;
      double alloc_s = 0, laid_s = 0;  // with -v: host time allocating, laying inputs out
      const auto timed_alloc = [&](std::int64_t n) {
        const auto ta = clock::now();
        const gpu::Handle h = tables.alloc(n);
        alloc_s += since(ta);
        alloc_total += since(ta);
        return h;
      };
      const std::int64_t n_out = m.shape.output_size();
      const gpu::Handle out = timed_alloc(n_out);
      const std::vector<int> target(m.shape.vars.begin(), m.shape.vars.end() - m.shape.n_marg);
      if (!m.group.empty() || m.union_of_eliminated)
        unions[k] = out, union_vars[k] = target;
      else if (m.child >= 0)
        from_above[bk.children[m.child]] = out;
      else
        joints.emplace_back(out, &m);
      const std::vector<int> target_card = cards_of(target, card);
      // The message's inputs on the device, each with its table's scope: the sources, the union
      // message it is taken from, or the message to child from_child (computed above) and that
      // child's output.
      std::vector<std::pair<gpu::Handle, const std::vector<int>*>> inputs;
      if (m.from_union >= 0) {
        inputs.emplace_back(unions[m.from_union], &union_vars[m.from_union]);
      } else if (m.from_child >= 0) {
        const std::size_t s = child_source(m.from_child);
        inputs.emplace_back(from_above[bk.children[m.from_child]], &src[b][s].scope);
        inputs.emplace_back(h[s], &src[b][s].scope);
      } else {
        for (int s : m.sources) inputs.emplace_back(h[s], &src[b][s].scope);
      }
      if (m.shape.n_marg == 0) {  // every input is over target variables: added onto it
        if (inputs.empty()) {
          zeros.emplace_back(n_out, 0.0);
          ctx.upload(out, zeros.back().data(), n_out, kStream);
        }
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          const auto st = strides_in(target, *inputs[i].second, card);
          if (i == 0)
            ctx.permute(out, target_card, st, inputs[i].first, kStream);
          else
            ctx.fold(out, target_card, st, inputs[i].first, kStream);
        }
      } else {
        std::vector<gpu::DeviceInput> in;
        std::vector<gpu::Handle> laid_out;
        for (std::size_t i = 0; i < inputs.size(); ++i) {
          const std::vector<int>& scope = m.scopes[i];
          if (scope == *inputs[i].second) {
            in.push_back({inputs[i].first, scope});
            continue;
          }
          const std::int64_t n = table_size(scope, card);
          const gpu::Handle t = timed_alloc(n);
          const std::vector<int> c = cards_of(scope, card);
          const std::vector<std::int64_t> st = strides_in(scope, *inputs[i].second, card);
          const auto tp = clock::now();
          ctx.permute(t, c, st, inputs[i].first, kStream);
          if (timed) {
            ctx.synchronize(kStream);
            std::string dims;
            for (std::size_t v = 0; v < c.size(); ++v) dims += fmt::format(" {}:{}", c[v], st[v]);
            permute_log.emplace_back(
                since(tp), fmt::format("bucket {} message {} input {}: 2^{:.1f} entries,{}", b, k,
                                       i, std::log2(static_cast<double>(n)), dims));
          }
          laid_out.push_back(t);
          ++permutes, ++laid;
          in.push_back({t, scope});
        }
        if (timed && laid > 0) {
          const auto tl = clock::now();
          ctx.synchronize(kStream);
          laid_s = since(tl);
        }
        prepare(kernel_at[b][k]);
        prep.rethrow();
        ctx.run_bucket(m.shape, in, out, kStream);
        for (gpu::Handle t : laid_out) tables.release(t);  // safe with the kernel still queued
      }
      if (m.from_union >= 0 && m.child >= 0) {
        // The belief over the child's output, divided by that output: the message.
        const std::size_t s = child_source(m.child);
        ctx.divide(out, target_card, strides_in(target, src[b][s].scope, card), h[s], kStream);
      }
      if (m.from_union >= 0 && (k + 1 == msg[b].size() || msg[b][k + 1].from_union != m.from_union))
        tables.release(unions[m.from_union]);  // its last message queued
      if (timed) {
        ctx.synchronize(kStream);
        std::string variant;
        if (m.shape.n_marg > 0) {
          const gpu::KernelChoice kc = ctx.choose(m.shape, m.scopes);
          variant = fmt::format(", {} {} threads x {} blocks, splits {} (shape {})",
                                gpu::to_string(kc.variant), kc.threads, kc.blocks, kc.splits,
                                gpu::bucket_spec(m.shape, m.scopes));
        }
        slow_messages.emplace_back(
            since(tm),
            fmt::format("bucket {} message {}: 2^{:.1f} outputs x 2^{:.1f} summed, {} inputs ({} "
                        "laid out: {:.2f} ms; allocations {:.2f} ms), {}{}",
                        b, k, std::log2(static_cast<double>(m.shape.output_size())),
                        std::log2(static_cast<double>(m.shape.marg_size())), m.scopes.size(), laid,
                        1e3 * laid_s, 1e3 * alloc_s,
                        m.child >= 0 ? "to a child" : "onto eliminated variables", variant));
      }
    }
    for (gpu::Handle t : owned) tables.release(t);
    if (!products.empty()) ctx.synchronize(kStream);  // their uploads done before they are freed
    for (int c : bk.children)
      if (held[c] >= 0) {
        ctx.release(held[c]);
        held[c] = -1;
      }
    if (!down[b].empty()) {  // uploaded: freed once the upload has run
      ctx.synchronize(kStream);
      LnTable().swap(down[b]);
    }
    if (timed) {
      ctx.synchronize(kStream);
      slowest.emplace_back(since(tb), b);
      gpu_seconds += since(tb);
    }
  }
  const double queued = since(t0);

  // The joints of the eliminated variables, back to the host and summed onto each variable.
  std::vector<std::vector<double>> onto(joints.size());
  for (std::size_t i = 0; i < joints.size(); ++i) {
    onto[i].resize(joints[i].second->shape.output_size());
    ctx.download(joints[i].first, onto[i].data(), static_cast<std::int64_t>(onto[i].size()),
                 kStream);
  }
  ctx.synchronize(kStream);
  if (timed) {
    std::sort(slowest.rbegin(), slowest.rend());
    std::string top;
    for (std::size_t i = 0; i < std::min<std::size_t>(slowest.size(), 5); ++i) {
      const int b = slowest[i].second;
      top += fmt::format(" bucket {} {:.1f} ms ({} messages, 2^{:.1f} states);", b,
                         1e3 * slowest[i].first, msg[b].size(), buckets[b].log2_states);
    }
    std::size_t messages = 0, from_children = 0, union_msgs = 0, from_unions = 0;
    std::size_t kept_joints = 0, from_kept = 0;
    for (const auto& ms : msg)
      for (const Message& m : ms) {
        ++messages;
        from_children += m.from_child >= 0;
        union_msgs += !m.group.empty();
        from_unions += m.from_union >= 0 && m.child >= 0;
        kept_joints += m.union_of_eliminated;
        from_kept += m.from_union >= 0 && m.child < 0;
      }
    spdlog::debug(
        "downward pass: {} buckets on the host, the others' {} messages on the GPU "
        "({} by kernels, {} inputs laid out; {} to children from {} unions of their "
        "outputs; {} onto eliminated variables from a child's belief, {} joints, {} of them from "
        "{} joints kept on the device), kernel plans {:.3f} s, the buckets {:.3f} s (on the host "
        "{:.3f} s, on the GPU {:.3f} s); the slowest:{}",
        on_host_buckets, messages, kernels.size(), permutes, from_unions, union_msgs, from_children,
        joints.size() - from_children, from_kept, kept_joints, prepared, queued - prepared,
        host_seconds, gpu_seconds, top);
    // The slowest messages, with the kernel each ran (a message's kernel runs alone with -v).
    std::sort(slow_messages.rbegin(), slow_messages.rend());
    for (std::size_t i = 0; i < std::min<std::size_t>(slow_messages.size(), 8); ++i)
      spdlog::debug("downward pass: {:.2f} ms {}", 1e3 * slow_messages[i].first,
                    slow_messages[i].second);
    // Where the messages' time goes besides their kernels: allocating their tables (host time)
    // and laying their inputs out in their order (each permute waited for).
    double permute_s = 0;
    for (const auto& pl : permute_log) permute_s += pl.first;
    spdlog::debug("downward pass: allocations {:.2f} ms, permutes {:.2f} ms in all",
                  1e3 * alloc_total, 1e3 * permute_s);
    std::sort(permute_log.rbegin(), permute_log.rend());
    for (std::size_t i = 0; i < std::min<std::size_t>(permute_log.size(), 8); ++i)
      spdlog::debug("downward pass: permute {:.2f} ms {}", 1e3 * permute_log[i].first,
                    permute_log[i].second);
  }
  for (std::size_t i = 0; i < joints.size(); ++i) {
    const BucketShape& shape = joints[i].second->shape;
    const std::vector<int> elim(shape.vars.begin(), shape.vars.end() - shape.n_marg);
    const std::vector<double>& t = onto[i];
    const double mx = *std::max_element(t.begin(), t.end());
    for (std::size_t k = 0; k < elim.size(); ++k) {
      const int v = elim[k];
      std::int64_t inner = 1;
      for (std::size_t j = k + 1; j < elim.size(); ++j) inner *= card[elim[j]];
      std::vector<double> sum(card[v], 0.0);
      for (std::size_t e = 0; e < t.size(); ++e)
        sum[(static_cast<std::int64_t>(e) / inner) % card[v]] += std::exp(t[e] - mx);
      LnTable& j = joint[v];
      j.resize(card[v]);
      for (int x = 0; x < card[v]; ++x) j[x] = mx == kNegInf ? kNegInf : mx + std::log(sum[x]);
    }
  }
}

}  // namespace kinfer::sched
