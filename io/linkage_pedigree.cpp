// LINKAGE pedigree files, pre- and post-makeped: docs/linkage-model.md, "The LINKAGE files".
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
using linkage::Pedigree;
using linkage::PedigreeFile;
using linkage::Person;
using linkage::Phenotype;

// ---------------------------------------------------------------------------------------------
// Pedigree files

namespace {

int phenotype_columns(const LocusFile& lf) {
  int p = 0;
  for (const Locus& L : lf.loci)
    p += L.type == LocusType::Numbered ? 2 : (L.n_classes() > 1 ? 2 : 1);
  return p;
}

struct RawPerson {
  std::string ped, id, father, mother;
  int sex = 0;
  long proband = 0;  // post-makeped column 9
  std::vector<Phenotype> pheno;
  long line = 0;
};

// Parses one line under one interpretation; returns "" or why it does not fit.
std::string parse_line(const Line& l, bool post, const LocusFile& lf, RawPerson& p,
                       int& bad_column) {
  const int base = post ? 9 : 5;
  const int sex_col = post ? 8 : 5;
  auto fail = [&](int col, const std::string& m) {
    bad_column = col;
    return m;
  };
  const auto& f = l.fields;
  p = RawPerson{};
  p.line = l.number;
  p.ped = f[0].text;
  p.id = f[1].text;
  p.father = f[2].text;
  p.mother = f[3].text;
  long v;
  if (post) {
    for (int c = 2; c <= 7; ++c)
      if (!parse_int(f[c - 1].text, v) || v < 0)
        return fail(c, "expected a numeric id (0 for none) in a post-makeped file, found '" +
                           f[c - 1].text + "'");
    if (!parse_int(f[8].text, p.proband) || p.proband < 0)
      return fail(
          9, "expected the proband/loop-breaker column (0, 1, 2, ...), found '" + f[8].text + "'");
  }
  if (!parse_int(f[sex_col - 1].text, v) || (v != 1 && v != 2))
    return fail(sex_col,
                "expected the sex, 1 (male) or 2 (female), found '" + f[sex_col - 1].text + "'");
  p.sex = static_cast<int>(v);
  int c = base;  // 0-based index of the next phenotype column
  for (int k = 0; k < lf.n_loci(); ++k) {
    const Locus& L = lf.loci[k];
    const std::string who = "locus " + std::to_string(k + 1) + " (" + L.name + ")";
    Phenotype ph;
    long a, b;
    if (L.type == LocusType::Affection) {
      if (!parse_int(f[c].text, a) || a < 0 || a > 2)
        return fail(c + 1, "expected the affection status at " + who +
                               ": 0 (unknown), 1 (unaffected) or 2 (affected), found '" +
                               f[c].text + "'");
      ph.a1 = static_cast<int>(a);
      ph.a2 = 1;
      ++c;
      if (L.n_classes() > 1) {
        if (!parse_int(f[c].text, b) || b < 1 || b > L.n_classes())
          return fail(c + 1, "expected the liability class at " + who + ": 1 to " +
                                 std::to_string(L.n_classes()) + ", found '" + f[c].text + "'");
        ph.a2 = static_cast<int>(b);
        ++c;
      }
    } else {
      for (int j = 0; j < 2; ++j) {
        long& x = j == 0 ? a : b;
        if (!parse_int(f[c + j].text, x) || x < 0 || x > L.n_alleles)
          return fail(c + j + 1, "expected an allele of " + who + ": 1 to " +
                                     std::to_string(L.n_alleles) + ", or 0 for untyped, found '" +
                                     f[c + j].text + "'");
      }
      if (lf.sex_linked && p.sex == 1) {
        if (a != 0 && b != 0 && a != b)
          return fail(c + 1, "a male has one X chromosome: expected 'a a' or 'a 0' at " + who +
                                 ", found '" + f[c].text + " " + f[c + 1].text + "'");
        ph.a1 = static_cast<int>(a != 0 ? a : b);
        ph.a2 = 0;
      } else {
        if ((a == 0) != (b == 0))
          return fail(c + 1, "expected two alleles or '0 0' (untyped) at " + who + ", found '" +
                                 f[c].text + " " + f[c + 1].text + "' (half-typed)");
        ph.a1 = static_cast<int>(a);
        ph.a2 = static_cast<int>(b);
      }
      c += 2;
    }
    p.pheno.push_back(ph);
  }
  return "";
}

bool same_pheno(const std::vector<Phenotype>& a, const std::vector<Phenotype>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto x = std::minmax(a[i].a1, a[i].a2), y = std::minmax(b[i].a1, b[i].a2);
    if (x != y) return false;
  }
  return true;
}

// Pass 1: which format, and every line read under it. Post-makeped needs every line to have
// 9+P columns and to parse as such; otherwise pre-makeped (extra trailing columns are comments
// in both).
std::vector<RawPerson> read_records(const std::string& path, const std::vector<Line>& lines,
                                    const LocusFile& lf, bool& post) {
  const int P = phenotype_columns(lf);
  const int pre_cols = 5 + P, post_cols = 9 + P;
  post = true;
  std::vector<RawPerson> raw(lines.size());
  for (std::size_t i = 0; i < lines.size() && post; ++i) {
    int col = 0;
    if (static_cast<int>(lines[i].fields.size()) < post_cols ||
        !parse_line(lines[i], true, lf, raw[i], col).empty())
      post = false;
  }
  if (post) return raw;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    if (static_cast<int>(l.fields.size()) < pre_cols)
      throw InputError(path, l.number,
                       "column " + std::to_string(l.fields.size() + 1) + ": expected " +
                           std::to_string(pre_cols) +
                           " columns (pre-makeped: pedigree, id, "
                           "father, mother, sex and " +
                           std::to_string(P) + " phenotype columns for the " +
                           std::to_string(lf.n_loci()) + " loci of " + lf.path + ") or " +
                           std::to_string(post_cols) + " (post-makeped), found " +
                           std::to_string(l.fields.size()));
    int col = 0;
    std::string why = parse_line(l, false, lf, raw[i], col);
    if (!why.empty()) {
      // Tell the user which reading failed when the line would have been long enough for both.
      if (static_cast<int>(l.fields.size()) >= post_cols) {
        RawPerson tmp;
        int col2 = 0;
        std::string why2 = parse_line(l, true, lf, tmp, col2);
        if (!why2.empty())
          why += " (read as pre-makeped; as post-makeped, column " + std::to_string(col2) + ": " +
                 why2 + ")";
      }
      throw InputError(path, l.number, "column " + std::to_string(col) + ": " + why);
    }
  }
  return raw;
}

// An error in one pedigree: the file, the line, the column (0: none) and the pedigree named.
struct PedigreeError {
  const std::string& path;
  const std::string& ped;
  [[noreturn]] void operator()(long line, int col, const std::string& m) const {
    throw InputError(
        path, line,
        (col > 0 ? "column " + std::to_string(col) + ": " : "") + "pedigree " + ped + ": " + m);
  }
};

// Loop breakers (post-makeped column 9 = k+1): two records for one person; keeps the one with
// parents and points the copy's children at it. Returns how many were merged.
int merge_loop_breakers(std::vector<RawPerson>& rp, const PedigreeError& err) {
  int merged = 0;
  std::map<std::string, std::string> alias;  // removed id -> kept id
  std::map<long, std::vector<int>> breaker;
  for (std::size_t i = 0; i < rp.size(); ++i)
    if (rp[i].proband >= 2) breaker[rp[i].proband].push_back(static_cast<int>(i));
  std::vector<char> drop(rp.size(), 0);
  for (auto& [k, idx] : breaker) {
    if (idx.size() != 2)
      err(rp[idx[0]].line, 9,
          "loop breaker " + std::to_string(k - 1) + " (column 9 = " + std::to_string(k) +
              ") must appear exactly twice, found " + std::to_string(idx.size()) + " record(s)");
    int keep = idx[0], copy = idx[1];
    const bool p0 = rp[idx[0]].father != "0", p1 = rp[idx[1]].father != "0";
    if (p0 && p1)
      err(rp[idx[1]].line, 3,
          "both records of loop breaker " + std::to_string(k - 1) +
              " have parents; the copy must be a founder");
    if (p1) std::swap(keep, copy);
    if (rp[keep].sex != rp[copy].sex || !same_pheno(rp[keep].pheno, rp[copy].pheno))
      err(rp[copy].line, 0,
          "the two records of loop breaker " + std::to_string(k - 1) + " (ids " + rp[keep].id +
              " and " + rp[copy].id + ") differ in sex or phenotypes");
    alias[rp[copy].id] = rp[keep].id;
    drop[copy] = 1;
    ++merged;
  }
  std::vector<RawPerson> kept;
  for (std::size_t i = 0; i < rp.size(); ++i)
    if (!drop[i]) kept.push_back(rp[i]);
  rp = std::move(kept);
  for (auto& r : rp) {
    if (alias.count(r.father)) r.father = alias[r.father];
    if (alias.count(r.mother)) r.mother = alias[r.mother];
  }
  return merged;
}

// The pedigree's people, each linked to its parents (both or neither, of the right sex).
Pedigree link_people(const std::string& ped, const std::vector<RawPerson>& rp,
                     const PedigreeError& err) {
  Pedigree P;
  P.id = ped;
  std::map<std::string, int> index;
  for (const RawPerson& r : rp) {
    if (r.id == "0") err(r.line, 2, "an individual id must not be 0 (0 means 'no parent')");
    if (!index.emplace(r.id, static_cast<int>(P.people.size())).second)
      err(r.line, 2,
          "individual " + r.id + " appears twice (first on line " +
              std::to_string(P.people[index[r.id]].line) + ")");
    Person p;
    p.id = r.id;
    p.sex = r.sex;
    p.pheno = r.pheno;
    p.line = r.line;
    P.people.push_back(std::move(p));
  }
  for (std::size_t i = 0; i < rp.size(); ++i) {
    const RawPerson& r = rp[i];
    const bool hf = r.father != "0", hm = r.mother != "0";
    if (hf != hm)
      err(r.line, hf ? 4 : 3,
          "individual " + r.id + " has " + (hf ? "a father" : "a mother") + " but no " +
              (hf ? "mother" : "father") + ": expected both parents or neither (0 0)");
    if (!hf) continue;
    for (int side = 0; side < 2; ++side) {
      const std::string& pid = side == 0 ? r.father : r.mother;
      auto it = index.find(pid);
      if (it == index.end())
        err(r.line, 3 + side,
            "the " + std::string(side == 0 ? "father" : "mother") + " of " + r.id + ", " + pid +
                ", is not an individual of this pedigree");
      const Person& par = P.people[it->second];
      const int want = side == 0 ? 1 : 2;
      if (par.sex != want)
        err(r.line, 3 + side,
            "individual " + pid + " is the " + (side == 0 ? "father" : "mother") + " of " + r.id +
                " but has sex " + std::to_string(par.sex) + " (" +
                (par.sex == 1 ? "male" : "female") + ") on line " + std::to_string(par.line));
      (side == 0 ? P.people[i].father : P.people[i].mother) = it->second;
    }
  }
  return P;
}

// Nobody may be their own ancestor: depth-first search for a cycle through parent links.
void check_no_own_ancestor(const Pedigree& P, const PedigreeError& err) {
  const int n = static_cast<int>(P.people.size());
  std::vector<int> state(n, 0), via(n, -1);
  for (int s = 0; s < n; ++s) {
    if (state[s]) continue;
    std::vector<std::pair<int, int>> stack{{s, 0}};
    state[s] = 1;
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      const int par[2] = {P.people[v].father, P.people[v].mother};
      if (k < 2) {
        const int u = par[k++];
        if (u < 0) continue;
        if (state[u] == 1) {
          std::string chain = P.people[u].id;
          for (int w = v; w != u && w >= 0; w = via[w]) chain = P.people[w].id + " -> " + chain;
          chain = P.people[u].id + " -> " + chain;
          err(P.people[u].line, 0,
              "individual " + P.people[u].id +
                  " is their own ancestor (child -> parent: " + chain + ")");
        }
        if (state[u] == 0) {
          state[u] = 1;
          via[u] = v;
          stack.push_back({u, 0});
        }
      } else {
        state[v] = 2;
        stack.pop_back();
      }
    }
  }
}

// Loops: the graph of individuals and matings (person - mating node - child) is a forest unless
// it has a marriage loop or inbreeding; edges are counted against nodes per component
// (Pedigree::has_loop). Unrelated parts are warned about: FASTLINK counts only the part of the
// first individual, kinfer counts all.
void find_loops(Pedigree& P, const std::string& path, std::vector<std::string>& warnings) {
  const int n = static_cast<int>(P.people.size());
  std::map<std::pair<int, int>, int> mating;
  int nodes = n, edges = 0;
  for (const Person& p : P.people)
    if (!p.founder()) {
      auto [it, fresh] = mating.emplace(std::make_pair(p.father, p.mother), nodes);
      if (fresh) ++nodes, edges += 2;
      ++edges;
    }
  // Components via union-find.
  std::vector<int> parent(nodes);
  for (int i = 0; i < nodes; ++i) parent[i] = i;
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const auto& [fm, m] : mating) {
    parent[find(fm.first)] = find(m);
    parent[find(fm.second)] = find(m);
  }
  for (int i = 0; i < n; ++i)
    if (!P.people[i].founder())
      parent[find(i)] = find(mating[{P.people[i].father, P.people[i].mother}]);
  int comps = 0;
  for (int i = 0; i < nodes; ++i) comps += find(i) == i;
  P.has_loop = edges > nodes - comps;
  if (comps > 1) {
    std::vector<std::string> others;
    for (int i = 0; i < n; ++i)
      if (find(i) != find(0)) others.push_back(P.people[i].id);
    std::string list;
    for (std::size_t i = 0; i < others.size() && i < 12; ++i) list += (i ? ", " : "") + others[i];
    if (others.size() > 12) list += ", ...";
    warnings.push_back(
        path + ": pedigree " + P.id + " has " + std::to_string(comps) + " unrelated parts: " +
        std::to_string(others.size()) + " individual(s) (" + list +
        ") are not related to individual " + P.people[0].id +
        "; kinfer counts every part, FASTLINK only the part with the first individual");
  }
}

}  // namespace

PedigreeFile parse_pedigree_file(const std::string& path, const std::string& text,
                                 const LocusFile& lf) {
  const std::vector<Line> lines = split_lines(text);
  if (lines.empty()) throw InputError(path, 0, "the pedigree file is empty");
  if (looks_like_locus_file(text))
    throw InputError(path, 1,
                     "this looks like a locus (data) file (a first line of four numbers, lines of "
                     "different widths), not a pedigree file: the pedigree file goes with "
                     "-p/--ped, the locus file with -d/--dat");
  bool post = true;
  const std::vector<RawPerson> raw = read_records(path, lines, lf, post);
  PedigreeFile out;
  out.path = path;
  out.post_makeped = post;
  // Group lines by pedigree, in order of first appearance.
  std::map<std::string, int> ped_index;
  std::vector<std::vector<int>> members;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    auto [it, fresh] = ped_index.emplace(raw[i].ped, static_cast<int>(members.size()));
    if (fresh) members.emplace_back();
    members[it->second].push_back(static_cast<int>(i));
  }
  for (std::size_t pi = 0; pi < members.size(); ++pi) {
    std::vector<RawPerson> rp;
    for (int i : members[pi]) rp.push_back(raw[i]);
    const std::string ped = rp[0].ped;
    const PedigreeError err{path, ped};
    if (post) out.merged_loop_breakers += merge_loop_breakers(rp, err);
    Pedigree P = link_people(ped, rp, err);
    check_no_own_ancestor(P, err);
    find_loops(P, path, out.warnings);
    out.pedigrees.push_back(std::move(P));
  }
  return out;
}

PedigreeFile read_pedigree_file(const std::string& path, const LocusFile& loci) {
  return parse_pedigree_file(path, read_file(path), loci);
}

std::string format_post_makeped(const PedigreeFile& peds, const LocusFile& lf) {
  std::ostringstream s;
  for (std::size_t pi = 0; pi < peds.pedigrees.size(); ++pi) {
    const Pedigree& P = peds.pedigrees[pi];
    const int n = static_cast<int>(P.people.size());
    std::vector<int> first_child(n, -1), next_pat(n, -1), next_mat(n, -1), last_pat(n, -1),
        last_mat(n, -1);
    for (int i = 0; i < n; ++i) {
      const Person& p = P.people[i];
      if (p.founder()) continue;
      if (first_child[p.father] < 0) first_child[p.father] = i;
      if (first_child[p.mother] < 0) first_child[p.mother] = i;
      if (last_pat[p.father] >= 0) next_pat[last_pat[p.father]] = i;
      last_pat[p.father] = i;
      if (last_mat[p.mother] >= 0) next_mat[last_mat[p.mother]] = i;
      last_mat[p.mother] = i;
    }
    for (int i = 0; i < n; ++i) {
      const Person& p = P.people[i];
      s << (pi + 1) << ' ' << (i + 1) << ' ' << (p.father + 1) << ' ' << (p.mother + 1) << ' '
        << (first_child[i] + 1) << ' ' << (next_pat[i] + 1) << ' ' << (next_mat[i] + 1) << ' '
        << p.sex << ' ' << (i == 0 ? 1 : 0);
      for (int k = 0; k < lf.n_loci(); ++k) {
        const Locus& L = lf.loci[k];
        const Phenotype& ph = p.pheno[k];
        if (L.type == LocusType::Affection) {
          s << "  " << ph.a1;
          if (L.n_classes() > 1) s << ' ' << ph.a2;
        } else if (lf.sex_linked && p.sex == 1) {
          s << "  " << ph.a1 << ' ' << ph.a1;
        } else {
          s << "  " << ph.a1 << ' ' << ph.a2;
        }
      }
      s << '\n';
    }
  }
  return s.str();
}

}  // namespace kinfer::io
