#include "io/uai.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "engine/errors.hpp"
#include "io/text_file.hpp"

namespace kinfer::io {

namespace {
constexpr std::int64_t kMaxVars = 100'000'000;
constexpr std::int64_t kMaxCard = 1'000'000;
constexpr std::int64_t kMaxTable = std::int64_t(1) << 34;  // refuse absurd declared sizes
}  // namespace

Network read_uai(const std::string& path) {
  std::string text = read_file(path);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(path, 0, "file is empty, expected a UAI network (MARKOV or BAYES)");
  Tokenizer tk(path, std::move(text));
  Network net;
  net.source = path;
  std::string kind(tk.word("the network type MARKOV or BAYES"));
  if (kind != "MARKOV" && kind != "BAYES")
    tk.fail("expected the network type MARKOV or BAYES, found '" + kind + "'");
  net.kind = kind;
  const auto nvars = tk.integer("the number of variables", 0, kMaxVars);
  net.card.resize(nvars);
  for (std::int64_t v = 0; v < nvars; ++v)
    net.card[v] = static_cast<int>(tk.integer(
        "the cardinality of variable " + std::to_string(v) + " of " + std::to_string(nvars), 1,
        kMaxCard));
  const auto nfac = tk.integer("the number of factors", 0, 100'000'000);
  net.factors.resize(nfac);
  for (std::int64_t f = 0; f < nfac; ++f) {
    const std::string which = "factor " + std::to_string(f);
    const auto k = tk.integer("the scope size of " + which, 0, 1000);
    auto& sc = net.factors[f].scope;
    for (std::int64_t j = 0; j < k; ++j) {
      int v = static_cast<int>(tk.integer("variable " + std::to_string(j + 1) + " of " +
                                              std::to_string(k) + " in the scope of " + which,
                                          0, nvars - 1));
      for (int u : sc)
        if (u == v)
          tk.fail("variable " + std::to_string(v) + " appears twice in the scope of " + which);
      sc.push_back(v);
    }
    if (table_size(sc, net.card) > kMaxTable)
      tk.fail("the table of " + which + " would have more than 2^34 entries");
  }
  for (std::int64_t f = 0; f < nfac; ++f) {
    auto& fac = net.factors[f];
    const std::string which = "factor " + std::to_string(f);
    const std::int64_t expect = table_size(fac.scope, net.card);
    const auto n =
        tk.integer("the number of table entries of " + which + " (" + std::to_string(expect) + ")",
                   0, kMaxTable);
    fac.source_line = tk.line();
    if (n != expect)
      tk.fail(which + " declares " + std::to_string(n) + " table entries, expected " +
              std::to_string(expect) + " (the product of its variables' cardinalities)");
    fac.table.resize(n);
    for (std::int64_t i = 0; i < n; ++i) {
      double x = tk.number("table entry " + std::to_string(i + 1) + " of " + std::to_string(n) +
                           " of " + which);
      if (!std::isfinite(x) || x < 0) {
        std::ostringstream s;
        s << "table entry " << i + 1 << " of " << which << " is " << x
          << ", expected a finite non-negative number";
        tk.fail(s.str());
      }
      fac.table[i] = x;
    }
  }
  if (!tk.at_end())
    tk.fail("unexpected content after the last table (" + std::to_string(nfac) +
            " factors were declared)");
  return net;
}

Evidence read_evidence(const std::string& path, const Network& net) {
  std::string text = read_file(path);
  Evidence ev;
  ev.source = path;
  // Tokens with their lines, so we can tell the two forms apart by count.
  Tokenizer tk(path, text);
  std::vector<std::pair<std::int64_t, long>> tok;
  while (!tk.at_end()) {
    long line = tk.line();
    tok.push_back(
        {tk.integer("a count, variable index or value (evidence files hold integers only)",
                    std::numeric_limits<std::int64_t>::min(),
                    std::numeric_limits<std::int64_t>::max()),
         line});
  }
  // An empty file is more often a file cut short than a statement: "0" says "no evidence".
  if (tok.empty())
    throw InputError(path, 0,
                     "the evidence file is empty; write 0 in it for no evidence, or leave out -e");
  // The two forms are told apart by their token counts; when neither fits, by the layout (the
  // older form has its sample count alone on the first line), so the message fits the intent.
  const auto count_ok = [&](std::size_t at) {
    return at < tok.size() && tok[at].first >= 0 &&
           static_cast<std::int64_t>(tok.size() - at) == 1 + 2 * tok[at].first;
  };
  std::size_t start;
  if (count_ok(0)) {
    start = 0;  // UAI 2014: k v1 x1 ...
  } else if (tok[0].first == 1 && count_ok(1)) {
    start = 1;  // older form: a sample count of 1, then k v1 x1 ...
  } else {
    // Older form: the sample count alone on line 1, then one line per sample.
    std::set<long> lines_after;
    for (std::size_t i = 1; i < tok.size(); ++i) lines_after.insert(tok[i].second);
    const bool older =
        tok.size() >= 2 && tok[1].second > tok[0].second &&
        (tok[0].first == 1 || static_cast<std::int64_t>(lines_after.size()) == tok[0].first);
    if (older && tok[0].first != 1)
      throw InputError(path, tok[0].second,
                       "the file holds " + std::to_string(tok[0].first) +
                           " evidence samples, expected exactly 1");
    const std::size_t at = older ? 1 : 0;
    const auto k = tok[at].first;
    if (k < 0)
      throw InputError(
          path, tok[at].second,
          "expected the number of observed variables (at least 0), found " + std::to_string(k));
    throw InputError(path, tok.back().second,
                     "expected " + std::to_string(k) + " (variable, value) pair" +
                         (k == 1 ? "" : "s") + " after the count " + std::to_string(k) +
                         " on line " + std::to_string(tok[at].second) + ", found " +
                         std::to_string(tok.size() - at - 1) + " integer" +
                         (tok.size() - at - 1 == 1 ? "" : "s") + " after it");
  }
  const std::int64_t k = tok[start].first;
  std::map<int, std::pair<int, long>> seen;
  for (std::int64_t i = 0; i < k; ++i) {
    auto [v, lv] = tok[start + 1 + 2 * i];
    auto [x, lx] = tok[start + 2 + 2 * i];
    if (v < 0 || v >= net.num_vars())
      throw InputError(path, lv,
                       "evidence variable " + std::to_string(v) +
                           " does not exist, expected an index from 0 to " +
                           std::to_string(net.num_vars() - 1));
    const int c = net.card[v];
    if (x < 0 || x >= c)
      throw InputError(path, lx,
                       "evidence value " + std::to_string(x) + " for variable " +
                           std::to_string(v) + " is outside its domain 0.." +
                           std::to_string(c - 1));
    auto it = seen.find(static_cast<int>(v));
    if (it != seen.end()) {
      if (it->second.first != x)
        throw InputError(path, lv,
                         "conflicting evidence: variable " + std::to_string(v) + " is set to " +
                             std::to_string(it->second.first) + " (line " +
                             std::to_string(it->second.second) + ") and to " + std::to_string(x));
      continue;
    }
    seen[static_cast<int>(v)] = {static_cast<int>(x), lv};
    ev.observed.push_back({static_cast<int>(v), static_cast<int>(x)});
  }
  return ev;
}

std::string default_evidence_path(const std::string& network_path) {
  namespace fs = std::filesystem;
  std::string base = network_path;
  for (const std::string& cand : {base + ".evid", base + ".evid.gz"})
    if (fs::exists(cand)) return cand;
  if (base.size() > 3 && base.substr(base.size() - 3) == ".gz") {
    base.resize(base.size() - 3);
    for (const std::string& cand : {base + ".evid", base + ".evid.gz"})
      if (fs::exists(cand)) return cand;
  }
  return "";
}

Evidence read_evidence_of(const Network& net, const std::string& network_path,
                          const std::string& evidence_path, std::string* used) {
  const std::string path =
      evidence_path.empty() ? default_evidence_path(network_path) : evidence_path;
  if (used) *used = path;
  return path.empty() ? Evidence{} : read_evidence(path, net);
}

NetworkWithEvidence read_network_and_evidence(const std::string& network_path,
                                              const std::string& evidence_path) {
  NetworkWithEvidence r;
  r.net = read_uai(network_path);
  r.ev = read_evidence_of(r.net, network_path, evidence_path, &r.evidence_path);
  return r;
}

}  // namespace kinfer::io
