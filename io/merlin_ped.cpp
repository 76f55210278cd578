// MERLIN pedigree files, allele frequencies counted from them, and the LINKAGE structures one
// analysis (a model and a chromosome) is built into (io/merlin.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "engine/errors.hpp"
#include "io/fields.hpp"
#include "io/linkage.hpp"
#include "io/merlin.hpp"
#include "io/text_file.hpp"

namespace kinfer::io {

namespace {

[[noreturn]] void fail(const std::string& path, long line, int column, const std::string& msg) {
  throw InputError(path, line, column > 0 ? "column " + std::to_string(column) + ": " + msg : msg);
}

bool missing_code(const std::string& s) {
  return s == "0" || s == "x" || s == "X" || s == "." || s == "NA";
}

// Labels sorted numerically when every label is a number, else as text.
void sort_labels(std::vector<std::string>& labels) {
  long v;
  const bool numeric = std::all_of(labels.begin(), labels.end(),
                                   [&](const std::string& s) { return parse_int(s, v); });
  std::sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    if (!numeric) return a < b;
    long x = 0, y = 0;
    parse_int(a, x);
    parse_int(b, y);
    return x < y;
  });
}

}  // namespace

MerlinPedigree parse_merlin_ped(const std::string& path, const std::string& text,
                                const MerlinData& dat) {
  MerlinPedigree p;
  p.path = path;
  for (const Line& l : split_lines(text)) {
    if (l.fields[0].text[0] == '#') continue;
    const auto& f = l.fields;
    p.last_line = l.number;
    if (f.size() < 5)
      fail(path, l.number, static_cast<int>(f.size()) + 1,
           "expected FAMILY PERSON FATHER MOTHER SEX and the items of " + dat.path + ", found " +
               std::to_string(f.size()) + " field(s)");
    MerlinPerson q;
    q.line = l.number;
    q.family = f[0].text;
    q.id = f[1].text;
    q.father = missing_code(f[2].text) ? "0" : f[2].text;
    q.mother = missing_code(f[3].text) ? "0" : f[3].text;
    const std::string s = f[4].text;
    if (s == "1" || s == "m" || s == "M" || s == "male")
      q.sex = 1;
    else if (s == "2" || s == "f" || s == "F" || s == "female")
      q.sex = 2;
    else
      fail(path, l.number, 5, "expected the sex, 1 (male) or 2 (female), found '" + s + "'");
    std::size_t c = 5;  // next field
    for (const MerlinItem& it : dat.items) {
      const std::string what = std::string(it.type == 'A'   ? "the affection status "
                                           : it.type == 'M' ? "the genotype of marker "
                                                            : "item ") +
                               it.name + " (" + dat.path + " line " + std::to_string(it.line) + ")";
      if (c >= f.size())
        fail(path, l.number, static_cast<int>(c) + 1, "expected " + what + ", found end of line");
      if (it.type == 'A') {
        const std::string& v = f[c].text;
        int st;
        if (missing_code(v))
          st = 0;
        else if (v == "1")
          st = 1;
        else if (v == "2")
          st = 2;
        else
          fail(path, l.number, static_cast<int>(c) + 1,
               "expected " + what + ": 1 (unaffected), 2 (affected), 0 or x (unknown), found '" +
                   v + "'");
        q.status.push_back(st);
        q.status_column.push_back(static_cast<int>(c) + 1);
        ++c;
      } else if (it.type == 'M') {
        MerlinGenotype g;
        g.column = static_cast<int>(c) + 1;
        const std::string& v = f[c].text;
        const auto slash = v.find('/');
        std::string a, b;
        if (slash != std::string::npos) {
          a = v.substr(0, slash);
          b = v.substr(slash + 1);
          ++c;
        } else {
          if (c + 1 >= f.size())
            fail(path, l.number, static_cast<int>(c) + 2,
                 "expected the second allele of " + what +
                     " (alleles as '1 2' or '1/2'), found "
                     "end of line");
          a = v;
          b = f[c + 1].text;
          c += 2;
        }
        if (a.empty() || b.empty() || b.find('/') != std::string::npos)
          fail(path, l.number, g.column,
               "expected " + what + " as 'a/b' or 'a b', found '" + v + "'");
        g.a1 = normalise_allele(a);
        g.a2 = normalise_allele(b);
        q.genotypes.push_back(g);
      } else {
        c += static_cast<std::size_t>(it.columns);  // trait, covariate, zygosity, skip
        if (c > f.size())
          fail(path, l.number, static_cast<int>(f.size()) + 1,
               "expected " + what + ", found end of line");
      }
    }
    if (c < f.size())
      fail(path, l.number, static_cast<int>(c) + 1,
           "more fields than the items of " + dat.path + " describe (" +
               std::to_string(dat.items.size()) + " item(s)); found '" + f[c].text + "'");
    p.people.push_back(std::move(q));
  }
  if (p.people.empty()) throw InputError(path, 0, "the pedigree file lists nobody");
  return p;
}

std::map<std::string, MerlinAlleles> estimate_frequencies(const MerlinData& dat,
                                                          const MerlinPedigree& ped,
                                                          const std::set<std::string>& x_markers) {
  std::map<std::string, MerlinAlleles> out;
  int m = 0;
  for (const MerlinItem& it : dat.items) {
    if (it.type != 'M') continue;
    const bool x = x_markers.count(it.name) > 0;
    std::map<std::string, double> count;
    double total = 0;
    for (const MerlinPerson& q : ped.people) {
      const MerlinGenotype& g = q.genotypes[m];
      if (x && q.sex == 1) {
        // A male's X genotype is written 'a a' (or 'a 0'): one allele.
        const std::string& a = g.a1.empty() ? g.a2 : g.a1;
        if (!a.empty()) count[a] += 1, total += 1;
        continue;
      }
      for (const std::string* a : {&g.a1, &g.a2})
        if (!a->empty()) count[*a] += 1, total += 1;
    }
    MerlinAlleles al;
    al.line = it.line;
    for (const auto& [lab, n] : count) al.labels.push_back(lab);
    sort_labels(al.labels);
    for (const std::string& lab : al.labels) al.freq.push_back(count[lab] / total);
    if (al.labels.empty()) al.labels = {"1"}, al.freq = {1.0};  // nobody typed: uninformative
    out[it.name] = std::move(al);
    ++m;
  }
  return out;
}

MerlinFiles read_merlin_files(const std::string& dat_path, const std::string& ped_path,
                              const std::string& map_path, const std::string& freq_path) {
  MerlinFiles f;
  f.dat = parse_merlin_dat(dat_path, read_file(dat_path));
  f.ped = parse_merlin_ped(ped_path, read_file(ped_path), f.dat);
  f.map = parse_merlin_map(map_path, read_file(map_path));
  if (!freq_path.empty()) {
    f.freq = parse_merlin_freq(freq_path, read_file(freq_path));
    f.have_freq = true;
  }
  return f;
}

std::vector<std::string> merlin_chromosomes(const MerlinFiles& f) {
  std::set<std::string> markers;
  for (const MerlinItem& it : f.dat.items)
    if (it.type == 'M') markers.insert(it.name);
  std::vector<std::string> out;
  for (const MerlinMapEntry& e : f.map.markers)
    if (markers.count(e.marker) && std::find(out.begin(), out.end(), e.chromosome) == out.end())
      out.push_back(e.chromosome);
  if (out.empty())
    throw InputError(f.map.path, 0,
                     "no marker of " + f.dat.path + " is on this map: nothing to analyse");
  return out;
}

namespace {

// The trait: the index, among the affection (A) items, of the one the model names.
int trait_item(const MerlinFiles& f, const MerlinModel& model, const std::string& model_path) {
  int trait = -1, a = 0;
  std::string names;
  for (const MerlinItem& it : f.dat.items) {
    if (it.type != 'A') continue;
    if (it.name == model.trait) trait = a;
    names += (names.empty() ? "" : ", ") + it.name;
    ++a;
  }
  if (trait < 0)
    fail(model_path, model.line, 1,
         "the model's affection status '" + model.trait + "' is not an A item of " + f.dat.path +
             (names.empty() ? " (which has none)" : " (A items: " + names + ")"));
  return trait;
}

struct MappedMarker {
  int item;  // index among the marker items
  const MerlinMapEntry* pos;
};

// The markers of this chromosome, in map order (stable for equal positions); `x_markers`: the
// markers on chromosome X; a note on the markers the map does not place.
std::vector<MappedMarker> chromosome_markers(const MerlinFiles& f, const std::string& chromosome,
                                             std::set<std::string>& x_markers,
                                             std::vector<std::string>& notes) {
  std::map<std::string, const MerlinMapEntry*> where;
  for (const MerlinMapEntry& e : f.map.markers) where[e.marker] = &e;
  std::vector<MappedMarker> markers;
  std::vector<std::string> unmapped;
  int m = 0;
  for (const MerlinItem& it : f.dat.items) {
    if (it.type != 'M') continue;
    auto w = where.find(it.name);
    if (w == where.end())
      unmapped.push_back(it.name);
    else if (w->second->chromosome == chromosome)
      markers.push_back({m, w->second});
    if (w != where.end() && w->second->chromosome == "X") x_markers.insert(it.name);
    ++m;
  }
  std::stable_sort(
      markers.begin(), markers.end(),
      [](const MappedMarker& x, const MappedMarker& y) { return x.pos->cm < y.pos->cm; });
  if (!unmapped.empty()) {
    std::string list;
    for (std::size_t i = 0; i < unmapped.size() && i < 10; ++i)
      list += (i ? ", " : "") + unmapped[i];
    if (unmapped.size() > 10) list += ", ...";
    notes.push_back(std::to_string(unmapped.size()) + " marker(s) of " + f.dat.path +
                    " are not on " + f.map.path + " and are left out: " + list);
  }
  return markers;
}

// Allele frequencies: the .freq file's, else counted over every genotyped person (counted
// once, when first needed).
class MarkerAlleles {
 public:
  MarkerAlleles(const MerlinFiles& f, const std::set<std::string>& x_markers)
      : f_(f), x_markers_(x_markers) {}
  const MerlinAlleles& of(const std::string& name) {
    if (f_.have_freq) {
      auto it = f_.freq.markers.find(name);
      if (it != f_.freq.markers.end()) return it->second;
    }
    if (counted_.empty()) counted_ = estimate_frequencies(f_.dat, f_.ped, x_markers_);
    estimated.push_back(name);
    return counted_.at(name);
  }
  std::vector<std::string> estimated;  // the markers whose frequencies were counted

 private:
  const MerlinFiles& f_;
  const std::set<std::string>& x_markers_;
  std::map<std::string, MerlinAlleles> counted_;
};

// The trait locus of the model: two alleles, allele 2 the disease allele.
linkage::Locus trait_locus(const MerlinModel& model, bool x_linked) {
  linkage::Locus T;
  T.name = model.trait;
  T.type = linkage::LocusType::Affection;
  T.n_alleles = 2;
  T.freq = {1 - model.freq, model.freq};
  T.penetrance = {{model.pen[0], model.pen[1], model.pen[2]}};
  if (x_linked) T.male_penetrance = {{model.pen[0], model.pen[2]}};
  T.line = model.line;
  return T;
}

// The locus file of one analysis: the trait, then the markers in map order. Returns, per
// marker, its allele labels' numbers (label -> allele 1..n).
std::vector<std::map<std::string, int>> analysis_loci(const MerlinModel& model,
                                                      const std::vector<MappedMarker>& markers,
                                                      MarkerAlleles& alleles,
                                                      MerlinAnalysisInput& in) {
  linkage::LocusFile& lf = in.loci;
  lf.sex_linked = in.x_linked;
  lf.sex_difference = 0;
  lf.map_function = linkage::MapFunction::Haldane;
  lf.loci.push_back(trait_locus(model, in.x_linked));
  std::vector<std::map<std::string, int>> index;
  for (const MappedMarker& mk : markers) {
    const MerlinAlleles& al = alleles.of(mk.pos->marker);
    linkage::Locus L;
    L.name = mk.pos->marker;
    L.type = linkage::LocusType::Numbered;
    L.n_alleles = static_cast<int>(al.labels.size());
    L.freq = al.freq;
    L.labels = al.labels;
    L.line = al.line;
    std::map<std::string, int> ix;
    for (std::size_t i = 0; i < al.labels.size(); ++i) ix[al.labels[i]] = static_cast<int>(i) + 1;
    index.push_back(std::move(ix));
    lf.loci.push_back(std::move(L));
    in.cm.push_back(mk.pos->cm);
  }
  const int n = lf.n_loci();
  for (int k = 0; k < n; ++k) lf.map_order.push_back(k);
  // The trait's own interval is not used by multipoint scans (it moves); two-point analyses
  // set it per theta. Between markers: Haldane, MERLIN's map function.
  lf.male_theta.push_back(0.5);
  for (std::size_t i = 1; i < in.cm.size(); ++i)
    lf.male_theta.push_back(
        linkage::morgans_to_theta((in.cm[i] - in.cm[i - 1]) / 100, linkage::MapFunction::Haldane));
  lf.female_theta = lf.male_theta;
  return index;
}

// The pedigree as a pre-makeped LINKAGE file with the .ped's line numbers and columns 1-5 as
// they are: the trait's status, then each marker's genotype as allele numbers (a male's X
// marker written homozygous).
std::string linkage_pedigree_text(const MerlinFiles& f, int trait,
                                  const std::vector<MappedMarker>& markers,
                                  const std::vector<std::map<std::string, int>>& index,
                                  MarkerAlleles& alleles, const MerlinAnalysisInput& in) {
  std::vector<std::string> lines(static_cast<std::size_t>(f.ped.last_line));
  for (const MerlinPerson& q : f.ped.people) {
    std::ostringstream s;
    s << q.family << ' ' << q.id << ' ' << q.father << ' ' << q.mother << ' ' << q.sex << ' '
      << q.status[trait];
    for (std::size_t k = 0; k < markers.size(); ++k) {
      const MerlinGenotype& g = q.genotypes[markers[k].item];
      const std::string& name = markers[k].pos->marker;
      int al[2] = {0, 0};
      for (int j = 0; j < 2; ++j) {
        const std::string& lab = j == 0 ? g.a1 : g.a2;
        if (lab.empty()) continue;
        auto it = index[k].find(lab);
        if (it == index[k].end()) {
          std::string known;
          for (std::size_t i = 0; i < in.loci.loci[k + 1].freq.size() && i < 12; ++i)
            known += (i ? " " : "") + alleles.of(name).labels[i];
          fail(f.ped.path, q.line, g.column,
               "allele '" + lab + "' of marker " + name + " is not among its alleles (" + known +
                   ")" + (f.have_freq ? " in " + f.freq.path : ""));
        }
        al[j] = it->second;
      }
      if (in.x_linked && q.sex == 1) {
        if (al[0] && al[1] && al[0] != al[1])
          fail(f.ped.path, q.line, g.column,
               "a male has one X chromosome: expected a homozygous genotype of " + name +
                   " (chromosome X), found '" + g.a1 + "/" + g.a2 + "'");
        const int x = al[0] ? al[0] : al[1];
        s << ' ' << x << ' ' << x;
      } else {
        if ((al[0] == 0) != (al[1] == 0))
          fail(f.ped.path, q.line, g.column,
               "expected two alleles or a missing genotype of marker " + name +
                   ", found one allele missing");
        s << ' ' << al[0] << ' ' << al[1];
      }
    }
    lines[static_cast<std::size_t>(q.line - 1)] = s.str();
  }
  std::string text;
  for (const std::string& l : lines) text += l + '\n';
  return text;
}

}  // namespace

MerlinAnalysisInput merlin_analysis_input(const MerlinFiles& f, const MerlinModel& model,
                                          const std::string& model_path,
                                          const std::string& chromosome) {
  MerlinAnalysisInput in;
  in.chromosome = chromosome;
  in.x_linked = chromosome == "X";
  const int trait = trait_item(f, model, model_path);
  std::set<std::string> x_markers;
  const std::vector<MappedMarker> markers = chromosome_markers(f, chromosome, x_markers, in.notes);
  if (!f.have_freq) in.estimated_frequencies = true;
  MarkerAlleles alleles(f, x_markers);
  in.loci.path = f.dat.path;
  const std::vector<std::map<std::string, int>> index = analysis_loci(model, markers, alleles, in);
  if (!alleles.estimated.empty() && f.have_freq)
    in.notes.push_back(std::to_string(alleles.estimated.size()) + " marker(s) missing from " +
                       f.freq.path + ": allele frequencies counted over all genotyped people (" +
                       alleles.estimated.front() + (alleles.estimated.size() > 1 ? ", ..." : "") +
                       ")");
  if (in.x_linked)
    in.notes.push_back(
        "chromosome X: X-linked analysis; males carry one allele and have the penetrance of "
        "the homozygous genotype (p0 or p2)");
  // Read by the LINKAGE reader, which checks parents, sexes, ancestry and loops and gives the
  // same messages.
  in.peds = parse_pedigree_file(
      f.ped.path, linkage_pedigree_text(f, trait, markers, index, alleles, in), in.loci);
  return in;
}

std::vector<MerlinAnalysisInput> merlin_marker_analyses(MerlinFiles f, const std::string& map_path,
                                                        const std::string& command) {
  const std::string trait = "(" + command + ": no trait)";
  f.dat.items.push_back({'A', trait, 1, 0});
  for (MerlinPerson& q : f.ped.people) q.status.push_back(0), q.status_column.push_back(0);
  MerlinModel model;
  model.trait = trait;
  model.freq = 0.5;
  model.pen[0] = model.pen[1] = model.pen[2] = 1;
  std::vector<MerlinAnalysisInput> out;
  for (const std::string& chr : merlin_chromosomes(f)) {
    out.push_back(merlin_analysis_input(f, model, map_path, chr));
    auto& notes = out.back().notes;
    std::erase_if(notes, [](const std::string& n) { return n.find("penetrance") != n.npos; });
  }
  return out;
}

}  // namespace kinfer::io
