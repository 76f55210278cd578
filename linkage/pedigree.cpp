#include "linkage/pedigree.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace kinfer::linkage {

namespace {

std::string phenotype_text(const Person& p, const Locus& L, bool sex_linked, int k) {
  const Phenotype& ph = p.pheno[k];
  std::ostringstream s;
  if (L.type == LocusType::Affection) {
    s << (ph.a1 == 2 ? "affected" : ph.a1 == 1 ? "unaffected" : "unknown");
    if (L.n_classes() > 1) s << ", class " << ph.a2;
  } else if (ph.a1 == 0) {
    s << "untyped";
  } else if (sex_linked && p.sex == 1) {
    s << L.allele_name(ph.a1);
  } else {
    s << L.allele_name(ph.a1) << '/' << L.allele_name(ph.a2);
  }
  return s.str();
}

}  // namespace

std::string describe(const Inconsistency& e, const LocusFile& lf, const Pedigree& ped) {
  const Locus& L = lf.loci[e.locus];
  std::ostringstream s;
  s << "pedigree " << e.pedigree << ", locus " << e.locus + 1 << " (" << L.name << "): " << e.detail
    << ":";
  for (std::size_t i = 0; i < e.individuals.size(); ++i) {
    const std::string& id = e.individuals[i];
    for (const Person& p : ped.people)
      if (p.id == id)
        s << (i ? "," : "") << ' ' << id << " (" << phenotype_text(p, L, lf.sex_linked, e.locus)
          << ", line " << p.line << ')';
  }
  return s.str();
}

namespace {

// Allele recoding: the alleles someone is typed with keep their identity, the others merge
// into one (`recode`). Fills out.freq and out.original; returns original (1-based) ->
// recoded (0-based).
std::vector<int> recode_alleles(const Pedigree& ped, const Locus& L, int k, bool recode,
                                PedigreeLocus& out) {
  std::vector<int> code(L.n_alleles + 1, -1);
  if (L.type == LocusType::Numbered && recode) {
    std::vector<char> seen(L.n_alleles + 1, 0);
    for (const Person& p : ped.people) seen[p.pheno[k].a1] = seen[p.pheno[k].a2] = 1;
    double other = 0;
    bool any_other = false;
    for (int a = 1; a <= L.n_alleles; ++a) {
      if (seen[a]) {
        code[a] = static_cast<int>(out.freq.size());
        out.freq.push_back(L.freq[a - 1]);
        out.original.push_back(a);
      } else {
        other += L.freq[a - 1];
        any_other = true;
      }
    }
    if (any_other) {
      for (int a = 1; a <= L.n_alleles; ++a)
        if (!seen[a]) code[a] = static_cast<int>(out.freq.size());
      out.freq.push_back(other);
      out.original.push_back(0);
    }
  } else {
    for (int a = 1; a <= L.n_alleles; ++a) {
      code[a] = a - 1;
      out.freq.push_back(L.freq[a - 1]);
      out.original.push_back(a);
    }
  }
  return code;
}

// Phenotype weights of each ordered genotype (out.weight, per person).
void phenotype_weights(const Pedigree& ped, const Locus& L, int k, const std::vector<int>& code,
                       PedigreeLocus& out) {
  const int np = static_cast<int>(ped.people.size());
  const int n = out.n_alleles;
  out.weight.resize(np);
  for (int i = 0; i < np; ++i) {
    const Person& p = ped.people[i];
    const Phenotype& ph = p.pheno[k];
    const bool hemi = !out.carries_paternal(p);
    std::vector<double>& w = out.weight[i];
    w.assign(hemi ? n : n * n, 0.0);
    if (L.type == LocusType::Affection) {
      const int cls = ph.a2 - 1;
      for (int g = 0; g < static_cast<int>(w.size()); ++g) {
        const double pen = hemi ? L.male_penetrance[cls][g]
                                : L.penetrance[cls][genotype_index(g / n + 1, g % n + 1, n)];
        w[g] = ph.a1 == 2 ? pen : ph.a1 == 1 ? 1.0 - pen : 1.0;
      }
    } else if (ph.a1 == 0) {
      std::fill(w.begin(), w.end(), 1.0);
    } else if (hemi) {
      w[code[ph.a1]] = 1.0;
    } else {
      const int a = code[ph.a1], b = code[ph.a2];
      w[a * n + b] = w[b * n + a] = 1.0;
    }
  }
}

// Genotype elimination in one nuclear family: keeps the genotypes of the father, the mother and
// each child that some mating of the parents' remaining genotypes explains for every child.
// Sets `changed` when a genotype goes; returns false when someone has none left.
bool eliminate_in_family(const Pedigree& ped, int f, int m, const std::vector<int>& kids,
                         PedigreeLocus& out, bool& changed) {
  const int n = out.n_alleles;
  const std::vector<double>& wf = out.weight[f];  // the father: n*n, or n (hemizygous)
  const std::vector<double>& wm = out.weight[m];
  const bool f_hemi = !out.carries_paternal(ped.people[f]);
  std::vector<char> save_f(wf.size(), 0), save_m(wm.size(), 0);
  std::vector<std::vector<char>> save_k(kids.size());
  for (std::size_t c = 0; c < kids.size(); ++c) save_k[c].assign(out.weight[kids[c]].size(), 0);
  for (int gf = 0; gf < static_cast<int>(wf.size()); ++gf) {
    if (wf[gf] <= 0) continue;
    const int fa[2] = {f_hemi ? gf : gf / n, f_hemi ? gf : gf % n};
    for (int gm = 0; gm < static_cast<int>(wm.size()); ++gm) {
      if (wm[gm] <= 0) continue;
      const int ma[2] = {gm / n, gm % n};
      // Every child needs a genotype this mating can transmit.
      bool ok = true;
      std::vector<std::vector<int>> fit(kids.size());
      for (std::size_t c = 0; c < kids.size() && ok; ++c) {
        const Person& kid = ped.people[kids[c]];
        const std::vector<double>& wk = out.weight[kids[c]];
        if (!out.carries_paternal(kid)) {
          for (int x : ma)
            if (wk[x] > 0) fit[c].push_back(x);
        } else {
          for (int x : fa)
            for (int y : ma)
              if (wk[x * n + y] > 0) fit[c].push_back(x * n + y);
        }
        ok = !fit[c].empty();
      }
      if (!ok) continue;
      save_f[gf] = save_m[gm] = 1;
      for (std::size_t c = 0; c < kids.size(); ++c)
        for (int g : fit[c]) save_k[c][g] = 1;
    }
  }
  auto apply = [&](int who, const std::vector<char>& save) {
    std::vector<double>& w = out.weight[who];
    bool any = false;
    for (std::size_t g = 0; g < w.size(); ++g) {
      if (w[g] > 0 && !save[g]) w[g] = 0, changed = true;
      any |= w[g] > 0;
    }
    return any;
  };
  bool alive = apply(f, save_f) & apply(m, save_m);
  for (std::size_t c = 0; c < kids.size(); ++c) alive &= apply(kids[c], save_k[c]);
  return alive;
}

// Genotype elimination over the nuclear families until nothing changes. Returns the family
// (father, mother, children) left without genotypes, or empty.
std::vector<int> eliminate_genotypes(const Pedigree& ped, PedigreeLocus& out) {
  const int np = static_cast<int>(ped.people.size());
  // Nuclear families: (father, mother) -> children.
  std::map<std::pair<int, int>, std::vector<int>> families;
  for (int i = 0; i < np; ++i)
    if (!ped.people[i].founder())
      families[{ped.people[i].father, ped.people[i].mother}].push_back(i);
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& [parents, kids] : families) {
      const auto [f, m] = parents;
      if (!eliminate_in_family(ped, f, m, kids, out, changed)) {
        std::vector<int> who{f, m};
        who.insert(who.end(), kids.begin(), kids.end());
        return who;
      }
    }
  }
  return {};
}

// The recoded alleles each person's paternal and maternal allele can still be (out.dom_p,
// out.dom_m), from the genotypes left.
void allele_domains(const Pedigree& ped, PedigreeLocus& out) {
  const int np = static_cast<int>(ped.people.size());
  const int n = out.n_alleles;
  out.dom_p.resize(np);
  out.dom_m.resize(np);
  for (int i = 0; i < np; ++i) {
    const std::vector<double>& w = out.weight[i];
    std::vector<char> p(n, 0), m(n, 0);
    if (!out.carries_paternal(ped.people[i])) {
      for (int g = 0; g < n; ++g) m[g] = w[g] > 0;
    } else {
      for (int g = 0; g < n * n; ++g)
        if (w[g] > 0) p[g / n] = m[g % n] = 1;
    }
    for (int a = 0; a < n; ++a) {
      if (p[a]) out.dom_p[i].push_back(a);
      if (m[a]) out.dom_m[i].push_back(a);
    }
  }
}

}  // namespace

PedigreeLocus reduce_locus(const Pedigree& ped, const LocusFile& lf, int k,
                           const ReductionOptions& opt, Inconsistency* err) {
  const Locus& L = lf.loci[k];
  const int np = static_cast<int>(ped.people.size());
  PedigreeLocus out;
  out.locus = k;
  out.sex_linked = lf.sex_linked;
  const std::vector<int> code = recode_alleles(ped, L, k, opt.recode, out);
  out.n_alleles = static_cast<int>(out.freq.size());
  phenotype_weights(ped, L, k, code, out);

  // An inconsistency: where it shows (a person, or a nuclear family) and what it is.
  auto fail = [&](std::vector<int> who, const std::string& detail) {
    if (err) {
      err->pedigree = ped.id;
      err->locus = k;
      err->individuals.clear();
      for (int i : who) err->individuals.push_back(ped.people[i].id);
      err->detail = detail;
    }
  };
  for (int i = 0; i < np; ++i)
    if (std::none_of(out.weight[i].begin(), out.weight[i].end(), [](double x) { return x > 0; })) {
      fail({i},
           "the phenotype is impossible under the locus model (every genotype has penetrance 0)");
      return out;
    }
  if (opt.eliminate) {
    const std::vector<int> family = eliminate_genotypes(ped, out);
    if (!family.empty()) {
      fail(family, "no genotypes fit the nuclear family (father, mother, children)");
      return out;
    }
  }
  allele_domains(ped, out);
  return out;
}

}  // namespace kinfer::linkage
