// MERLIN data, map, frequency and model files (QTDT format; io/merlin.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "engine/errors.hpp"
#include "io/fields.hpp"
#include "io/merlin.hpp"
#include "io/text_file.hpp"

namespace kinfer::io {

namespace {

[[noreturn]] void fail(const std::string& path, long line, int column, const std::string& msg) {
  throw InputError(path, line, column > 0 ? "column " + std::to_string(column) + ": " + msg : msg);
}

std::string upper(const std::string& s) {
  std::string u(s.size(), ' ');
  for (std::size_t i = 0; i < s.size(); ++i)
    u[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
  return u;
}

double probability(const std::string& path, long line, const Field& f, const std::string& what,
                   bool open = false) {
  double v = 0;
  if (!parse_double(f.text, v) || v < 0 || v > 1 || (open && (v <= 0 || v >= 1)))
    fail(path, line, f.column,
         "expected " + what + (open ? " (strictly between 0 and 1)" : " (between 0 and 1)") +
             ", found '" + f.text + "'");
  return v;
}

}  // namespace

std::string normalise_allele(const std::string& label) {
  const std::string u = upper(label);
  if (u == "0" || u == "X" || u == "N" || u == "NA" || u == "." || u == "-") return "";
  if (u == "A") return "1";
  if (u == "C") return "2";
  if (u == "G") return "3";
  if (u == "T") return "4";
  long v;
  if (parse_int(label, v)) return std::to_string(v);  // "01" and "1" are one allele
  return label;
}

MerlinData parse_merlin_dat(const std::string& path, const std::string& text) {
  MerlinData d;
  d.path = path;
  std::set<std::string> names;
  int skipped[4] = {0, 0, 0, 0};  // T, C, Z, S
  for (const Line& l : split_lines(text)) {
    const Field& t = l.fields[0];
    if (t.text[0] == '#') continue;
    const std::string type = upper(t.text);
    MerlinItem it;
    it.line = l.number;
    if (type == "E" || type == "END") break;
    if (type[0] == 'S' && std::all_of(type.begin() + 1, type.end(), ::isdigit)) {
      long n = 1;
      if (type.size() > 1 && (!parse_int(type.substr(1), n) || n < 1))
        fail(path, l.number, t.column, "expected S or Sn (skip n >= 1 columns), found " + t.text);
      it.type = 'S';
      it.columns = static_cast<int>(n);
      it.name = l.fields.size() > 1 ? l.fields[1].text : "";
      skipped[3] += it.columns;
      d.items.push_back(it);
      continue;
    }
    if (type.size() != 1 || std::string("AMTCZ").find(type[0]) == std::string::npos)
      fail(path, l.number, t.column,
           "expected an item type: A (affection), M (marker), T (trait), C (covariate), "
           "Z (zygosity), S[n] (skip) or E (end), found '" +
               t.text + "'");
    if (l.fields.size() < 2)
      fail(path, l.number, 2, "expected the name of the " + t.text + " item, found end of line");
    it.type = type[0];
    it.name = l.fields[1].text;
    if (it.type == 'A' || it.type == 'M') {
      if (!names.insert(std::string(1, it.type) + it.name).second)
        fail(path, l.number, 2,
             std::string(it.type == 'A' ? "affection status " : "marker ") + it.name +
                 " appears twice");
    } else {
      ++skipped[it.type == 'T' ? 0 : it.type == 'C' ? 1 : 2];
    }
    d.items.push_back(it);
  }
  const char* what[4] = {"quantitative trait(s)", "covariate(s)", "zygosity column(s)",
                         "skipped column(s)"};
  for (int i = 0; i < 4; ++i)
    if (skipped[i])
      d.notes.push_back(path + ": " + std::to_string(skipped[i]) + " " + what[i] +
                        " read past (parametric linkage uses affection status and markers)");
  return d;
}

MerlinMap parse_merlin_map(const std::string& path, const std::string& text) {
  MerlinMap m;
  m.path = path;
  std::set<std::string> seen;
  bool first = true, extra = false;
  for (const Line& l : split_lines(text)) {
    if (l.fields[0].text[0] == '#') continue;
    const bool was_first = first;
    first = false;
    if (l.fields.size() < 3) {
      if (was_first && l.fields.size() >= 2) continue;  // a short header
      fail(path, l.number, static_cast<int>(l.fields.size()) + 1,
           "expected CHROMOSOME MARKER POSITION (cM), found " + std::to_string(l.fields.size()) +
               " field(s)");
    }
    MerlinMapEntry e;
    e.line = l.number;
    e.chromosome = l.fields[0].text;
    e.marker = l.fields[1].text;
    if (!parse_double(l.fields[2].text, e.cm)) {
      if (was_first) continue;  // CHROMOSOME MARKER POSITION header
      fail(path, l.number, 3,
           "expected the position of " + e.marker + " in cM, found '" + l.fields[2].text + "'");
    }
    const std::string chr = upper(e.chromosome);
    if (chr == "X" || chr == "CHRX") e.chromosome.assign(1, 'X');
    if (!seen.insert(e.marker).second)
      fail(path, l.number, 2, "marker " + e.marker + " appears twice in the map");
    extra = extra || l.fields.size() > 3;
    m.markers.push_back(e);
  }
  if (m.markers.empty()) throw InputError(path, 0, "the map lists no marker");
  if (extra)
    m.notes.push_back(path +
                      ": columns after POSITION ignored (kinfer uses the sex-averaged map, "
                      "as MERLIN does without --sexSpecific)");
  return m;
}

MerlinFreq parse_merlin_freq(const std::string& path, const std::string& text) {
  MerlinFreq f;
  f.path = path;
  MerlinAlleles* cur = nullptr;
  std::string cur_name;
  long cur_line = 0;
  bool numbered = false;  // F lines (alleles 1, 2, ...) rather than A lines
  auto finish = [&]() {
    if (!cur) return;
    if (cur->freq.empty()) fail(path, cur_line, 0, "marker " + cur_name + " has no F or A line");
    double sum = 0;
    for (double x : cur->freq) sum += x;
    // As the LINKAGE reader: 4 to 6 decimals are usual; no renormalisation.
    if (std::abs(sum - 1.0) > 1e-3)
      fail(path, cur_line, 0,
           "the allele frequencies of " + cur_name + " sum to " + fmt(sum) +
               ", expected 1 (within 0.001)");
  };
  for (const Line& l : split_lines(text)) {
    const Field& t = l.fields[0];
    if (t.text[0] == '#') continue;
    const std::string type = upper(t.text);
    if (type == "M") {
      finish();
      if (l.fields.size() < 2) fail(path, l.number, 2, "expected the marker name after M");
      cur_name = l.fields[1].text;
      cur_line = l.number;
      auto [it, fresh] = f.markers.emplace(cur_name, MerlinAlleles{});
      if (!fresh)
        fail(path, l.number, 2,
             "marker " + cur_name + " appears twice (first on line " +
                 std::to_string(it->second.line) + ")");
      cur = &it->second;
      cur->line = l.number;
      numbered = false;
    } else if (type == "F" || type == "A") {
      if (!cur) fail(path, l.number, 1, "expected 'M name' before the first " + t.text + " line");
      if (type == "F") {
        if (!cur->freq.empty() && !numbered)
          fail(path, l.number, 1, "marker " + cur_name + " mixes F and A lines");
        numbered = true;
        if (l.fields.size() < 2) fail(path, l.number, 2, "expected allele frequencies after F");
        for (std::size_t i = 1; i < l.fields.size(); ++i) {
          cur->freq.push_back(
              probability(path, l.number, l.fields[i], "an allele frequency of " + cur_name));
          cur->labels.push_back(std::to_string(cur->freq.size()));
        }
      } else {
        if (numbered) fail(path, l.number, 1, "marker " + cur_name + " mixes F and A lines");
        if (l.fields.size() < 3)
          fail(path, l.number, static_cast<int>(l.fields.size()) + 1,
               "expected 'A allele frequency'");
        const std::string lab = normalise_allele(l.fields[1].text);
        if (lab.empty())
          fail(path, l.number, 2, "'" + l.fields[1].text + "' is a missing-allele code");
        if (std::find(cur->labels.begin(), cur->labels.end(), lab) != cur->labels.end())
          fail(path, l.number, 2, "allele " + l.fields[1].text + " of " + cur_name + " twice");
        cur->labels.push_back(lab);
        cur->freq.push_back(probability(path, l.number, l.fields[2],
                                        "the frequency of allele " + l.fields[1].text));
      }
    } else {
      fail(path, l.number, 1,
           "expected M (marker), F (frequencies) or A (allele and frequency), found '" + t.text +
               "'");
    }
  }
  finish();
  return f;
}

std::vector<MerlinModel> parse_merlin_model(const std::string& path, const std::string& text) {
  std::vector<MerlinModel> out;
  bool first = true;
  for (const Line& l : split_lines(text)) {
    if (l.fields[0].text[0] == '#') continue;
    const auto& f = l.fields;
    double v;
    if (first && f.size() >= 2 && !parse_double(f[1].text, v)) {
      first = false;
      continue;  // DISEASE ALLELE_FREQ PENETRANCES LABEL
    }
    first = false;
    if (f.size() < 3)
      fail(path, l.number, static_cast<int>(f.size()) + 1,
           "expected AFFECTION ALLELE_FREQ PENETRANCES LABEL (penetrances as p0,p1,p2), found " +
               std::to_string(f.size()) + " field(s)");
    MerlinModel m;
    m.line = l.number;
    m.trait = f[0].text;
    m.freq = probability(path, l.number, f[1], "the disease allele frequency", true);
    std::size_t next;
    if (f[2].text.find(',') != std::string::npos || f.size() < 5 || !parse_double(f[3].text, v)) {
      const std::string& p = f[2].text;
      if (p.find('*') != std::string::npos)
        fail(path, l.number, 3,
             "penetrances that vary by liability class or covariate ('*') are not supported: "
             "expected p0,p1,p2");
      std::vector<std::string> parts;
      std::size_t a = 0;
      while (true) {
        const std::size_t b = p.find(',', a);
        parts.push_back(p.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
      }
      if (parts.size() != 3)
        fail(path, l.number, 3,
             "expected three penetrances p0,p1,p2 (0, 1 and 2 disease alleles), found '" + p + "'");
      for (int i = 0; i < 3; ++i)
        m.pen[i] = probability(path, l.number, Field{parts[i], 3}, "a penetrance");
      next = 3;
    } else {
      for (int i = 0; i < 3; ++i) m.pen[i] = probability(path, l.number, f[2 + i], "a penetrance");
      next = 5;
    }
    for (std::size_t i = next; i < f.size(); ++i)
      m.label += (m.label.empty() ? "" : "_") + f[i].text;
    if (m.label.empty()) m.label = "model" + std::to_string(out.size() + 1);
    out.push_back(m);
  }
  if (out.empty()) throw InputError(path, 0, "the model file has no model line");
  return out;
}

std::vector<MerlinModel> read_merlin_model(const std::string& path) {
  return parse_merlin_model(path, read_file(path));
}

}  // namespace kinfer::io
