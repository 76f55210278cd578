// LINKAGE locus ("data") files: docs/linkage-model.md, "The LINKAGE files".
#include "io/linkage.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "engine/errors.hpp"
#include "io/fields.hpp"
#include "io/text_file.hpp"

namespace kinfer::io {

using linkage::Locus;
using linkage::LocusFile;
using linkage::LocusType;

namespace {

// Reads a locus file line by line as LINKAGE does: each item takes the leading numbers of a
// line; the rest of the line (after `<<`, a name, `#`) is a comment.
class LocusReader {
 public:
  LocusReader(std::string path, const std::string& text)
      : path_(std::move(path)), lines_(split_lines(text)) {}

  bool at_end() const { return cur_ >= lines_.size(); }
  long line() const {
    return at_end() ? (lines_.empty() ? 0 : lines_.back().number) : lines_[cur_].number;
  }
  const Line& current() const { return lines_[cur_]; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(long line, int column, const std::string& msg) const {
    throw InputError(path_, line,
                     column > 0 ? "column " + std::to_string(column) + ": " + msg : msg);
  }

  // The numbers of one item: at least `min` and at most `max` leading numbers of the next line.
  // An item with `min == max` may continue onto following lines while its lines hold nothing
  // but numbers (long frequency lists are sometimes wrapped).
  std::vector<Field> numbers(int min, int max, const std::string& what,
                             long* first_line = nullptr) {
    if (at_end()) fail(line(), 0, "unexpected end of file, expected " + what);
    std::vector<Field> out;
    if (first_line) *first_line = lines_[cur_].number;
    while (true) {
      const Line& l = lines_[cur_];
      bool stopped = false;
      for (const Field& f : l.fields) {
        double v;
        if (static_cast<int>(out.size()) >= max || !parse_double(f.text, v)) {
          stopped = true;
          break;
        }
        out.push_back(f);
      }
      const int got = static_cast<int>(out.size());
      if (got >= min || stopped || min != max || cur_ + 1 >= lines_.size()) {
        if (got < min) {
          const Field* bad = nullptr;
          for (const Field& f : l.fields) {
            double v;
            if (!parse_double(f.text, v)) {
              bad = &f;
              break;
            }
          }
          std::string msg = "expected " + what + ": " + std::to_string(min) +
                            (min == max ? "" : " to " + std::to_string(max)) + " number" +
                            (max > 1 ? "s" : "") + ", found " + std::to_string(got);
          if (bad) msg += " before '" + bad->text + "'";
          fail(l.number, bad ? bad->column : 0, msg);
        }
        ++cur_;
        return out;
      }
      ++cur_;  // a wrapped list: continue on the next line
    }
  }

  // Whether the next line starts with `n` numbers between 0 and 1.
  bool next_are_probabilities(int n) const {
    if (at_end()) return false;
    const Line& l = lines_[cur_];
    if (static_cast<int>(l.fields.size()) < n) return false;
    for (int i = 0; i < n; ++i) {
      double v;
      if (!parse_double(l.fields[i].text, v) || v < 0 || v > 1) return false;
    }
    return true;
  }

  long to_int(const Field& f, long line, const std::string& what, long lo, long hi) const {
    long v;
    if (!parse_int(f.text, v))
      fail(line, f.column, "expected " + what + " (an integer), found '" + f.text + "'");
    if (v < lo || v > hi)
      fail(line, f.column,
           "expected " + what + " between " + std::to_string(lo) + " and " + std::to_string(hi) +
               ", found " + f.text);
    return v;
  }

  double to_prob(const Field& f, long line, const std::string& what, double hi = 1.0) const {
    double v = 0;
    parse_double(f.text, v);
    if (v < 0 || v > hi)
      fail(line, f.column, "expected " + what + " between 0 and " + fmt(hi) + ", found " + f.text);
    return v;
  }

 private:
  std::string path_;
  std::vector<Line> lines_;
  std::size_t cur_ = 0;
};

// A locus name from the header's comment: the word after "Locus", else the text after '#'.
std::string locus_name(const Line& l, std::size_t first_comment, int index) {
  std::string rest;
  for (std::size_t i = first_comment; i < l.fields.size(); ++i)
    rest += (rest.empty() ? "" : " ") + l.fields[i].text;
  auto pos = rest.find("Locus ");
  if (pos != std::string::npos) {
    std::istringstream s(rest.substr(pos + 6));
    std::string w;
    if (s >> w) return w;
  }
  pos = rest.find('#');
  if (pos != std::string::npos) {
    std::istringstream s(rest.substr(pos + 1));
    std::string w;
    if (s >> w) return w;
  }
  return "locus" + std::to_string(index + 1);
}

void check_frequencies(const LocusReader& r, const std::vector<Field>& f, long line,
                       std::vector<double>& freq, const std::string& locus) {
  double sum = 0;
  for (const Field& x : f) {
    freq.push_back(r.to_prob(x, line, "an allele frequency of " + locus));
    sum += freq.back();
  }
  // Files carry 4 to 6 decimals; FASTLINK does not renormalise and neither do we.
  if (std::abs(sum - 1.0) > 1e-3)
    r.fail(line, f.front().column,
           "the allele frequencies of " + locus + " sum to " + fmt(sum) +
               ", expected 1 (within 0.001)");
}

}  // namespace

namespace {

// The whitespace-separated fields of the first `most` non-blank lines.
std::vector<std::vector<std::string>> first_lines(const std::string& text, std::size_t most) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (out.size() < most && std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    if (!fields.empty()) out.push_back(std::move(fields));
  }
  return out;
}

bool has_comment(const std::vector<std::string>& fields) {
  for (const auto& w : fields)
    if (w.rfind("<<", 0) == 0) return true;
  return false;
}

}  // namespace

bool looks_like_pedigree_file(const std::string& text) {
  const auto lines = first_lines(text, 20);
  if (lines.size() < 2) return false;
  for (const auto& l : lines)
    if (l.size() != lines.front().size() || l.size() < 6 || has_comment(l)) return false;
  return true;
}

bool looks_like_locus_file(const std::string& text) {
  const auto lines = first_lines(text, 20);
  if (lines.size() < 3) return false;
  std::size_t numbers = 0;
  for (const auto& w : lines.front()) {
    if (w.rfind("<<", 0) == 0) break;
    if (w.find_first_not_of("0123456789") != std::string::npos) return false;
    ++numbers;
  }
  if (numbers < 4 || numbers > 5) return false;
  for (const auto& l : lines)
    if (l.size() != lines.front().size()) return true;
  return false;
}

namespace {

// Lines 1 and 2: number of loci, risk locus, sex-linked flag, program [Superlink's extra
// field]; mutation locus, male and female mutation rates, haplotype (linkage disequilibrium)
// flag. Returns the number of loci.
int read_header(LocusReader& r, LocusFile& lf) {
  long ln = 0;
  auto h =
      r.numbers(4, 5, "the first line: number of loci, risk locus, sex-linked flag, program", &ln);
  const int nloci = static_cast<int>(r.to_int(h[0], ln, "the number of loci", 1, 100000));
  if (nloci < 2)
    r.fail(ln, h[0].column,
           "a LOD score needs at least two loci, the locus file has " + std::to_string(nloci));
  lf.risk_locus = static_cast<int>(r.to_int(h[1], ln, "the risk locus (0 for none)", 0, nloci));
  lf.sex_linked = r.to_int(h[2], ln, "the sex-linked flag (0 autosomal, 1 X-linked)", 0, 1) == 1;
  lf.program = static_cast<int>(r.to_int(h[3], ln, "the program code", -1000000, 1000000));

  auto m = r.numbers(4, 4,
                     "the second line: mutation locus, male and female mutation rates, "
                     "haplotype flag",
                     &ln);
  r.to_int(m[0], ln, "the mutation locus", 0, nloci);
  double rate = 0;
  for (int i = 1; i <= 2; ++i) {
    parse_double(m[i].text, rate);
    if (rate != 0)
      r.fail(ln, m[i].column, "mutation rates are not supported: expected 0, found " + m[i].text);
  }
  if (r.to_int(m[3], ln, "the haplotype frequency flag", 0, 1) != 0)
    r.fail(ln, m[3].column,
           "haplotype frequencies (linkage disequilibrium) are not supported: "
           "expected 0, found 1");
  return nloci;
}

// Line 3, the map order: the input locus at each map position.
void read_map_order(LocusReader& r, int nloci, LocusFile& lf) {
  long ln = 0;
  auto o =
      r.numbers(nloci, nloci, "the map order (" + std::to_string(nloci) + " locus numbers)", &ln);
  std::vector<char> seen(nloci, 0);
  for (const Field& f : o) {
    const int k =
        static_cast<int>(r.to_int(f, ln, "a locus number in the map order", 1, nloci)) - 1;
    if (seen[k]) r.fail(ln, f.column, "locus " + f.text + " appears twice in the map order");
    seen[k] = 1;
    lf.map_order.push_back(k);
  }
}

// An affection locus's liability classes: per class its penetrances and, sex-linked, the
// males' (SwiftLink's files may leave that line out).
void read_penetrances(LocusReader& r, const std::string& desc, Locus& L, LocusFile& lf) {
  const int n = L.n_alleles;
  long ln = 0;
  auto c = r.numbers(1, 1, "the number of liability classes of " + desc, &ln);
  const int nc = static_cast<int>(r.to_int(c[0], ln, "the number of liability classes", 1, 10000));
  const int ng = n * (n + 1) / 2;
  for (int cl = 0; cl < nc; ++cl) {
    const std::string what = std::to_string(ng) + " penetrances of liability class " +
                             std::to_string(cl + 1) + " of " + desc;
    auto p = r.numbers(ng, ng, what, &ln);
    std::vector<double> v;
    for (const Field& f : p) v.push_back(r.to_prob(f, ln, "a penetrance"));
    L.penetrance.push_back(std::move(v));
    if (lf.sex_linked && !r.next_are_probabilities(n)) {
      // SwiftLink's files leave the male line out: a hemizygous male is then taken to be
      // like a homozygous female.
      std::vector<double> w;
      for (int a = 1; a <= n; ++a)
        w.push_back(L.penetrance.back()[linkage::genotype_index(a, a, n)]);
      L.male_penetrance.push_back(std::move(w));
      lf.warnings.push_back(r.path() + ":" + std::to_string(ln) + ": " + desc +
                            " has no male penetrance line after liability class " +
                            std::to_string(cl + 1) +
                            "; males use the homozygous female penetrances");
    } else if (lf.sex_linked) {
      auto q = r.numbers(n, n,
                         std::to_string(n) + " male penetrances of liability class " +
                             std::to_string(cl + 1) + " of " + desc + " (sex-linked)",
                         &ln);
      std::vector<double> w;
      for (const Field& f : q) w.push_back(r.to_prob(f, ln, "a male penetrance"));
      L.male_penetrance.push_back(std::move(w));
    }
  }
}

// The block of input locus k: type and number of alleles, allele frequencies, an affection
// locus's penetrances, and the risk allele of the risk locus.
Locus read_locus(LocusReader& r, int k, LocusFile& lf) {
  Locus L;
  long ln = 0;
  const std::string who = "locus " + std::to_string(k + 1);
  if (r.at_end()) r.fail(r.line(), 0, "unexpected end of file, expected the header of " + who);
  const Line& hl = r.current();
  auto hd = r.numbers(2, 2, "the header of " + who + ": locus type and number of alleles", &ln);
  L.line = ln;
  L.name = locus_name(hl, 2, k);
  const long type = r.to_int(hd[0], ln, "the type of " + who, -1000, 1000);
  if (type == 0 || type == 2)
    r.fail(ln, hd[0].column,
           who + " has type " + hd[0].text + " (" +
               (type == 0 ? "quantitative" : "binary factors") +
               "), which kinfer does not support: expected 1 (affection) "
               "or 3 (numbered alleles)");
  if (type != 1 && type != 3)
    r.fail(ln, hd[0].column,
           "expected the type of " + who +
               ": 1 (affection) or 3 (numbered "
               "alleles), found " +
               hd[0].text);
  L.type = type == 1 ? LocusType::Affection : LocusType::Numbered;
  L.n_alleles = static_cast<int>(r.to_int(hd[1], ln, "the number of alleles of " + who, 1, 1000));
  const int n = L.n_alleles;
  const std::string desc = who + " (" + L.name + ")";
  auto fq = r.numbers(n, n, std::to_string(n) + " allele frequencies of " + desc, &ln);
  check_frequencies(r, fq, ln, L.freq, desc);
  if (L.type == LocusType::Affection) read_penetrances(r, desc, L, lf);
  if (lf.risk_locus == k + 1) r.numbers(1, 1, "the risk allele of " + desc, &ln);
  return L;
}

// The map: sex difference and interference, then the recombination fractions between
// adjacent map positions (male first; female ones or their distance ratio by the sex
// difference).
void read_map(LocusReader& r, int nloci, LocusFile& lf) {
  long ln = 0;
  auto si = r.numbers(2, 2, "the sex-difference and interference line", &ln);
  lf.sex_difference = static_cast<int>(r.to_int(si[0], ln, "the sex difference (0, 1 or 2)", 0, 2));
  const long interference = r.to_int(si[1], ln, "the interference (0 Haldane, 2 Kosambi)", 0, 2);
  if (interference == 1)
    r.fail(ln, si[1].column,
           "interference 1 (a free interference parameter) is not supported: "
           "expected 0 (no interference, Haldane) or 2 (Kosambi)");
  lf.map_function =
      interference == 2 ? linkage::MapFunction::Kosambi : linkage::MapFunction::Haldane;
  if (lf.sex_linked && lf.sex_difference != 0)
    r.fail(ln, si[0].column,
           "a sex-linked locus file has recombination in females only: "
           "expected sex difference 0, found " +
               si[0].text);

  auto th =
      r.numbers(nloci - 1, nloci - 1, std::to_string(nloci - 1) + " recombination fractions", &ln);
  for (const Field& f : th)
    lf.male_theta.push_back(r.to_prob(f, ln, "a recombination fraction", 0.5));
  lf.female_theta = lf.male_theta;
  if (lf.sex_difference == 2) {
    auto ft = r.numbers(nloci - 1, nloci - 1,
                        std::to_string(nloci - 1) + " female recombination fractions", &ln);
    lf.female_theta.clear();
    for (const Field& f : ft)
      lf.female_theta.push_back(r.to_prob(f, ln, "a female recombination fraction", 0.5));
  } else if (lf.sex_difference == 1) {
    auto d = r.numbers(1, 1, "the female/male map distance ratio", &ln);
    parse_double(d[0].text, lf.distance_ratio);
    if (!(lf.distance_ratio > 0))
      r.fail(ln, d[0].column, "expected a positive female/male distance ratio, found " + d[0].text);
    lf.female_theta = lf.female_for(lf.male_theta);
  }
}

// The program-specific last line (MLINK or LINKMAP), when there is one.
void read_tail(LocusReader& r, LocusFile& lf) {
  if (r.at_end()) return;
  lf.tail.present = true;
  auto t = r.numbers(3, 3,
                     "the program line (MLINK: varied theta, increment, finish; LINKMAP: "
                     "moving locus, stop theta, grid size)",
                     &lf.tail.line);
  for (const Field& f : t) {
    double v = 0;
    parse_double(f.text, v);
    lf.tail.fields.push_back(f.text);
    lf.tail.values.push_back(v);
  }
}

}  // namespace

LocusFile parse_locus_file(const std::string& path, const std::string& text) {
  if (looks_like_pedigree_file(text))
    throw InputError(path, 1,
                     "this looks like a pedigree file (one person a line, every line of the same "
                     "width), not a locus file: the locus (data) file goes with -d/--dat, the "
                     "pedigree file with -p/--ped");
  LocusReader r(path, text);
  LocusFile lf;
  lf.path = path;
  const int nloci = read_header(r, lf);
  read_map_order(r, nloci, lf);
  for (int k = 0; k < nloci; ++k) lf.loci.push_back(read_locus(r, k, lf));  // in input order
  read_map(r, nloci, lf);
  read_tail(r, lf);
  return lf;
}

LocusFile read_locus_file(const std::string& path) {
  return parse_locus_file(path, read_file(path));
}
}  // namespace kinfer::io
