// [linkage][apps] `kinfer haplotypes` end to end: the most likely phased configuration of a
// pedigree over several markers against an enumeration written here from the model's definition
// (founder alleles from the allele frequencies, each meiosis passing the parent's paternal or
// maternal allele, the choice changing between adjacent markers with the recombination
// fraction, phenotypes = unordered genotypes), independent of kinfer's network code.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "test_linkage_support.hpp"

using namespace kinfer::linkage_test;

namespace {

struct Ind {
  int father = -1, mother = -1;  // index (parents come first), -1 for a founder
  int sex = 1;
  std::vector<std::pair<int, int>> typed;  // per marker: observed alleles (1-based), 0 0 untyped
};

struct Model {
  std::vector<std::vector<double>> freq;  // per marker
  std::vector<double> theta;              // between adjacent markers (both sexes, or male)
  std::vector<double> female = {};        // female thetas when they differ (empty: theta)
  double between(int side, int k) const {  // meioses of the father (0) or the mother (1)
    return side == 1 && !female.empty() ? female[k] : theta[k];
  }
};

// One phased configuration: per person and marker the paternal and maternal allele and, for
// non-founders, the selectors (0: the parent's paternal allele, 1: its maternal one).
struct Config {
  std::vector<std::vector<int>> pat, mat;   // [person][marker], 1-based alleles
  std::vector<std::vector<int>> spat, smat;  // [person][marker], -1 for founders
};

bool fits(const Ind& x, int k, int p, int m) {
  auto [a, b] = x.typed[k];
  if (a == 0) return true;
  return (a == p && b == m) || (a == m && b == p);
}

// log10 P(configuration, data) from the model's definition (a sum of logs: long maps underflow
// a product); -inf when the configuration is not one (a child's allele not its parent's allele
// the selector names, or a phenotype not matched).
double log10_probability(const std::vector<Ind>& ped, const Model& mo, const Config& c) {
  const int nm = static_cast<int>(mo.freq.size());
  double w = 0;
  for (std::size_t i = 0; i < ped.size(); ++i) {
    const Ind& x = ped[i];
    for (int k = 0; k < nm; ++k) {
      const int p = c.pat[i][k], m = c.mat[i][k];
      if (!fits(x, k, p, m)) return -INFINITY;
      if (x.father < 0) {
        w += std::log10(mo.freq[k][p - 1] * mo.freq[k][m - 1]);
        continue;
      }
      const int sel[2] = {c.spat[i][k], c.smat[i][k]};
      const int parent[2] = {x.father, x.mother};
      const int allele[2] = {p, m};
      for (int side = 0; side < 2; ++side) {
        const int q = parent[side];
        if (sel[side] != 0 && sel[side] != 1) return -INFINITY;
        if (allele[side] != (sel[side] == 0 ? c.pat[q][k] : c.mat[q][k])) return -INFINITY;
        if (k == 0) {
          w += std::log10(0.5);
        } else {
          const int prev = side == 0 ? c.spat[i][k - 1] : c.smat[i][k - 1];
          w += std::log10(prev == sel[side] ? 1 - mo.between(side, k - 1) : mo.between(side, k - 1));
        }
      }
    }
  }
  return w;
}

double probability(const std::vector<Ind>& ped, const Model& mo, const Config& c) {
  return std::pow(10.0, log10_probability(ped, mo, c));
}

// The largest P(configuration, data) over every configuration: founders' ordered alleles and
// non-founders' selectors enumerated marker by marker, person by person (parents first), a
// branch dropped as soon as a phenotype does not fit.
double enumerate_max(const std::vector<Ind>& ped, const Model& mo, long* count = nullptr) {
  const int np = static_cast<int>(ped.size()), nm = static_cast<int>(mo.freq.size());
  Config c;
  c.pat.assign(np, std::vector<int>(nm, 0));
  c.mat = c.pat;
  c.spat.assign(np, std::vector<int>(nm, -1));
  c.smat = c.spat;
  double best = 0;
  long n = 0;
  std::function<void(int, int, double)> visit = [&](int k, int i, double w) {
    if (i == np) ++k, i = 0;
    if (k == nm) {
      ++n;
      best = std::max(best, w);
      return;
    }
    const Ind& x = ped[i];
    if (x.father < 0) {
      const int na = static_cast<int>(mo.freq[k].size());
      for (int p = 1; p <= na; ++p)
        for (int m = 1; m <= na; ++m) {
          if (!fits(x, k, p, m)) continue;
          c.pat[i][k] = p, c.mat[i][k] = m;
          visit(k, i + 1, w * mo.freq[k][p - 1] * mo.freq[k][m - 1]);
        }
      return;
    }
    for (int sp = 0; sp < 2; ++sp)
      for (int sm = 0; sm < 2; ++sm) {
        const int p = sp == 0 ? c.pat[x.father][k] : c.mat[x.father][k];
        const int m = sm == 0 ? c.pat[x.mother][k] : c.mat[x.mother][k];
        if (!fits(x, k, p, m)) continue;
        double t = 0.25;
        if (k > 0) {
          const double tp = mo.between(0, k - 1), tm = mo.between(1, k - 1);
          t = (sp == c.spat[i][k - 1] ? 1 - tp : tp) * (sm == c.smat[i][k - 1] ? 1 - tm : tm);
        }
        c.pat[i][k] = p, c.mat[i][k] = m, c.spat[i][k] = sp, c.smat[i][k] = sm;
        visit(k, i + 1, w * t);
      }
  };
  visit(0, 0, 1.0);
  if (count) *count = n;
  return best;
}

// A LINKAGE locus file: an affection locus nobody's status is known at (input locus 1, placed
// on the map after the first marker when `trait_inside`, else first and unlinked) and the
// markers m1, m2, ... with recombination fractions `map_theta` between adjacent map positions
// (from the first marker); and a pre-makeped pedigree file (people named 1, 2, ... in order).
void write_input(const TempDir& dir, const std::vector<Ind>& ped, const Model& mo,
                 const std::vector<double>& map_theta, bool trait_inside) {
  const int nm = static_cast<int>(mo.freq.size());
  std::ostringstream dat;
  dat << nm + 1 << " 0 0 5\n0 0.0 0.0 0\n";
  if (trait_inside) {
    dat << "2 1";
    for (int k = 3; k <= nm + 1; ++k) dat << ' ' << k;
  } else {
    for (int k = 1; k <= nm + 1; ++k) dat << k << ' ';
  }
  dat << "\n1 2\n0.999 0.001\n1\n0.0 1.0 1.0\n";
  dat.precision(17);
  for (int k = 0; k < nm; ++k) {
    dat << "3 " << mo.freq[k].size() << " # m" << k + 1 << "\n";
    for (double f : mo.freq[k]) dat << f << ' ';
    dat << "\n";
  }
  dat << (mo.female.empty() ? "0 0\n" : "2 0\n");
  if (!trait_inside) dat << "0.5 ";  // the trait, first on the map, unlinked
  for (double t : map_theta) dat << t << ' ';
  if (!mo.female.empty()) {  // sex difference 2: the second line is female (no trait inside)
    dat << "\n0.5 ";
    for (double t : mo.female) dat << t << ' ';
  }
  dat << "\n1 0.1 0.45\n";
  write_text(dir / "h.dat", dat.str());
  std::ostringstream text;
  for (std::size_t i = 0; i < ped.size(); ++i) {
    const Ind& x = ped[i];
    text << "1 " << i + 1 << ' ' << x.father + 1 << ' ' << x.mother + 1 << ' ' << x.sex << " 0";
    for (auto [a, b] : x.typed) text << ' ' << a << ' ' << b;
    text << "\n";
  }
  write_text(dir / "h.pre", text.str());
}

nlohmann::json haplotypes(const TempDir& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"haplotypes", "-q", "--ped", (dir / "h.pre").string(), "--dat",
                                   (dir / "h.dat").string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult r = run_kinfer(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return nlohmann::json::parse(r.out);
}

// The command's configuration from its JSON (alleles are the numbers themselves here).
Config reported(const nlohmann::json& pedigree, int nm) {
  Config c;
  for (const auto& p : pedigree["persons"]) {
    std::vector<int> pat, mat, sp(nm, -1), sm(nm, -1);
    for (int k = 0; k < nm; ++k) {
      pat.push_back(std::stoi(p["paternal"][k].get<std::string>()));
      mat.push_back(std::stoi(p["maternal"][k].get<std::string>()));
      if (!p["founder"].get<bool>()) {
        sp[k] = p["paternal_origin"][k] == "P" ? 0 : 1;
        sm[k] = p["maternal_origin"][k] == "P" ? 0 : 1;
      }
    }
    c.pat.push_back(pat), c.mat.push_back(mat), c.spat.push_back(sp), c.smat.push_back(sm);
  }
  return c;
}

// The command (with `extra` options) attains the enumeration's maximum, and its reported
// probability is that of its reported configuration. Returns the JSON.
nlohmann::json check_against_enumeration(const std::vector<Ind>& ped, const Model& mo,
                                         const std::vector<double>& map_theta,
                                         bool trait_inside = false,
                                         const std::vector<std::string>& extra = {}) {
  TempDir dir;
  write_input(dir, ped, mo, map_theta, trait_inside);
  const auto j = haplotypes(dir, extra);
  const int nm = static_cast<int>(mo.freq.size());
  REQUIRE(j["markers"].size() == static_cast<std::size_t>(nm));
  for (int k = 0; k < nm; ++k) {
    std::string name = "m";
    name += std::to_string(k + 1);
    CHECK(j["markers"][k].get<std::string>() == name);
  }
  REQUIRE(j["pedigrees"].size() == 1);
  const auto& pj = j["pedigrees"][0];
  REQUIRE(pj["persons"].size() == ped.size());
  long n = 0;
  const double best = enumerate_max(ped, mo, &n);
  REQUIRE(best > 0);
  INFO(n << " configurations enumerated; the command's: " << pj.dump());
  const Config c = reported(pj, nm);
  const double own = probability(ped, mo, c);
  REQUIRE(own > 0);  // a configuration of the model, consistent with the data
  const double got = pj["log10_probability"].get<double>();
  CHECK(std::abs(got - std::log10(best)) < 1e-9);
  CHECK(std::abs(got - std::log10(own)) < 1e-9);
  CHECK(std::abs(j["log10_probability"].get<double>() - got) < 1e-12);
  // the recombinations reported are the origin changes between adjacent markers
  int recombinations = 0;
  for (std::size_t i = 0; i < ped.size(); ++i)
    for (int k = 0; k + 1 < nm; ++k)
      recombinations += (c.spat[i][k] >= 0 && c.spat[i][k] != c.spat[i][k + 1]) +
                        (c.smat[i][k] >= 0 && c.smat[i][k] != c.smat[i][k + 1]);
  CHECK(pj["recombinations"] == recombinations);
  return j;
}

}  // namespace

TEST_CASE("Haplotypes.NuclearFamilyThreeMarkers", "[linkage][apps]") {
  // father 1/2 2/3 1/2, mother 1/3 1/1 2/2; four children, one untyped at the middle marker,
  // one untyped everywhere.
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 2}, {2, 3}, {1, 2}}},
                                {-1, -1, 2, {{1, 3}, {1, 1}, {2, 2}}},
                                {0, 1, 1, {{1, 1}, {1, 2}, {2, 2}}},
                                {0, 1, 2, {{2, 3}, {0, 0}, {1, 2}}},
                                {0, 1, 2, {{1, 3}, {1, 3}, {2, 2}}},
                                {0, 1, 1, {{0, 0}, {0, 0}, {0, 0}}}};
  const Model mo{{{0.2, 0.3, 0.5}, {0.4, 0.35, 0.25}, {0.6, 0.4}}, {0.1, 0.2}};
  check_against_enumeration(ped, mo, mo.theta);
}

TEST_CASE("Haplotypes.SexSpecificThetas", "[linkage][apps]") {
  // male theta 0.02, female 0.3 (sex difference 2): the father's meioses use the first.
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 2}, {1, 2}, {1, 2}}},
                                {-1, -1, 2, {{1, 2}, {1, 2}, {1, 2}}},
                                {0, 1, 1, {{1, 1}, {1, 2}, {2, 2}}},
                                {0, 1, 2, {{1, 2}, {1, 1}, {1, 2}}},
                                {0, 1, 2, {{2, 2}, {1, 2}, {1, 1}}}};
  const Model mo{{{0.5, 0.5}, {0.4, 0.6}, {0.7, 0.3}}, {0.02, 0.05}, {0.3, 0.25}};
  const auto j = check_against_enumeration(ped, mo, mo.theta);
  CHECK(j["female_theta"][0].get<double>() == Approx(0.3));
}

TEST_CASE("Haplotypes.TraitBetweenMarkersCombinesTheta", "[linkage][apps]") {
  // The affection locus sits between m1 and m2 on the map (thetas 0.05 and 0.1 on its sides):
  // the markers' recombination fraction is Haldane's 0.05 + 0.1 - 2 * 0.05 * 0.1.
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 2}, {1, 2}}},
                                {-1, -1, 2, {{1, 1}, {1, 1}}},
                                {0, 1, 1, {{1, 2}, {1, 2}}},
                                {0, 1, 2, {{1, 2}, {1, 1}}},
                                {0, 1, 2, {{1, 1}, {1, 1}}},
                                {0, 1, 1, {{1, 1}, {1, 2}}}};
  const Model mo{{{0.5, 0.5}, {0.3, 0.7}}, {0.05 + 0.1 - 2 * 0.05 * 0.1}};
  const auto j = check_against_enumeration(ped, mo, {0.05, 0.1}, true);
  CHECK(j["male_theta"][0].get<double>() == Approx(mo.theta[0]).margin(1e-12));
}

TEST_CASE("Haplotypes.ThreeGenerations", "[linkage][apps]") {
  // grandparents 1 (untyped) and 2; their son 3 (untyped) and his wife 4; grandchildren 5-7.
  const std::vector<Ind> ped = {{-1, -1, 1, {{0, 0}, {0, 0}}},
                                {-1, -1, 2, {{1, 2}, {2, 3}}},
                                {0, 1, 1, {{0, 0}, {0, 0}}},
                                {-1, -1, 2, {{1, 1}, {1, 2}}},
                                {2, 3, 1, {{1, 2}, {2, 3}}},
                                {2, 3, 2, {{1, 3}, {1, 1}}},
                                {2, 3, 1, {{1, 2}, {2, 3}}}};
  const Model mo{{{0.5, 0.3, 0.2}, {0.2, 0.3, 0.5}}, {0.15}};
  check_against_enumeration(ped, mo, mo.theta);
}

TEST_CASE("Haplotypes.FirstCousinMarriage", "[linkage][apps]") {
  // grandparents 1 x 2; their children 3 (x spouse 5) and 4 (x spouse 6); cousins 7 x 8 have
  // children 9 and 10: a loop.
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 2}, {1, 2}}},
                                {-1, -1, 2, {{0, 0}, {0, 0}}},
                                {0, 1, 1, {{0, 0}, {0, 0}}},
                                {0, 1, 2, {{1, 2}, {2, 2}}},
                                {-1, -1, 2, {{1, 1}, {1, 2}}},
                                {-1, -1, 1, {{2, 2}, {1, 1}}},
                                {2, 4, 1, {{1, 2}, {1, 2}}},
                                {5, 3, 2, {{1, 2}, {1, 2}}},
                                {6, 7, 1, {{1, 1}, {1, 1}}},
                                {6, 7, 2, {{2, 2}, {2, 1}}}};
  const Model mo{{{0.3, 0.7}, {0.6, 0.4}}, {0.1}};
  check_against_enumeration(ped, mo, mo.theta);
}

TEST_CASE("Haplotypes.FounderPhaseTieRule", "[linkage][apps]") {
  // Swapping a founder's two haplotypes (and the children's origins from that founder) keeps
  // the probability: the paternal allele is the smaller at the founder's first heterozygous
  // marker. Mother 2/1 then 1/2, father homozygous at the first marker.
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 1}, {2, 3}, {3, 1}}},
                                {-1, -1, 2, {{2, 1}, {1, 2}, {1, 1}}},
                                {0, 1, 1, {{1, 2}, {2, 1}, {1, 3}}},
                                {0, 1, 2, {{1, 1}, {3, 2}, {1, 1}}}};
  const Model mo{{{0.5, 0.5}, {0.3, 0.3, 0.4}, {0.5, 0.2, 0.3}}, {0.1, 0.1}};
  const auto j = check_against_enumeration(ped, mo, mo.theta);
  for (const auto& p : j["pedigrees"][0]["persons"]) {
    if (!p["founder"].get<bool>()) continue;
    INFO("person " << p["id"]);
    for (std::size_t k = 0; k < p["paternal"].size(); ++k)
      if (p["paternal"][k] != p["maternal"][k]) {
        CHECK(std::stoi(p["paternal"][k].get<std::string>()) <
              std::stoi(p["maternal"][k].get<std::string>()));
        break;
      }
  }
  // the same answer on every run
  TempDir dir;
  write_input(dir, ped, mo, mo.theta, false);
  CHECK(haplotypes(dir).dump() == haplotypes(dir).dump());
}

TEST_CASE("Haplotypes.TextOutputAndOutFile", "[linkage][apps]") {
  TempDir dir;
  write_input(dir,
              {{-1, -1, 1, {{1, 2}, {1, 2}}},
               {-1, -1, 2, {{1, 1}, {1, 1}}},
               {0, 1, 1, {{1, 2}, {1, 1}}},
               {0, 1, 2, {{1, 1}, {1, 2}}},
               {0, 1, 2, {{1, 2}, {1, 2}}}},
              {{{0.5, 0.5}, {0.5, 0.5}}, {0.1}}, {0.1}, false);
  const ProcessResult r = run_kinfer({"haplotypes", "-q", "--ped", (dir / "h.pre").string(),
                                      "--dat", (dir / "h.dat").string(), "--out",
                                      (dir / "h.txt").string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(read_text(dir / "h.txt") == r.out);
  CHECK_THAT(r.out, Catch::Contains("markers (map order): m1 m2\n"));
  CHECK_THAT(r.out, Catch::Contains("recombination fractions: 0.1\n"));
  CHECK_THAT(r.out, Catch::Contains("pedigree 1: log10 P(haplotypes, data) = "));
  // two lines per person: the father's (founder) alleles without origins, phase 1-2 / 2-1
  // (children 3 and 4 then need no recombination, child 5 one; phase 1-1 / 2-2 would need two);
  // every child's two haplotypes with their origins.
  CHECK(lines_with(r.out, "paternal  ").size() == 5);
  CHECK(lines_with(r.out, "maternal  ").size() == 5);
  const auto father = lines_with(r.out, "  1       paternal");
  REQUIRE(father.size() == 1);
  CHECK_THAT(father[0], Catch::Matches(R"(\s+1\s+paternal\s+-\s+1\s+2\s+-)"));
  const auto child = lines_with(r.out, "  3       paternal");
  REQUIRE(child.size() == 1);
  CHECK_THAT(child[0], Catch::Matches(R"(\s+3\s+paternal\s+1\s+2:M\s+1:M\s+-)"));
  const auto child5 = lines_with(r.out, "  5       paternal");
  REQUIRE(child5.size() == 1);
  CHECK_THAT(child5[0], Catch::Matches(R"(\s+5\s+paternal\s+1\s+2:M\s+2:P\s+m1\|m2)"));
  CHECK_THAT(r.out, Catch::Contains(", 1 recombination\n"));
}

TEST_CASE("Haplotypes.BadInputExitsTwo", "[linkage][apps]") {
  TempDir dir;
  // parents 1/1 and 1/1 at m2, child 2/2: a Mendelian inconsistency at m2
  write_input(dir,
              {{-1, -1, 1, {{1, 2}, {1, 1}}},
               {-1, -1, 2, {{1, 1}, {1, 1}}},
               {0, 1, 1, {{1, 2}, {2, 2}}}},
              {{{0.5, 0.5}, {0.5, 0.5}}, {0.1}}, {0.1}, false);
  const std::string ped = (dir / "h.pre").string(), dat = (dir / "h.dat").string();
  ProcessResult r = run_kinfer({"haplotypes", "--ped", ped, "--dat", dat});
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("Mendelian") && Catch::Contains("(m2)") &&
                        Catch::Contains("pedigree 1"));
  CHECK(r.out.empty());
  r = run_kinfer({"haplotypes", "--ped", ped, "--dat", dat, "--json"});
  CHECK(r.rc == 2);
  CHECK(nlohmann::json::parse(r.out)["exit_code"] == 2);
  // a missing file, a missing option, a MERLIN-only option without -m, an unwritable --out
  CHECK(run_kinfer({"haplotypes", "--ped", (dir / "none.pre").string(), "--dat", dat}).rc == 2);
  CHECK(run_kinfer({"haplotypes", "--dat", dat}).rc == 2);
  CHECK(run_kinfer({"haplotypes", "--ped", ped, "--dat", dat, "-f", dat}).rc == 2);
  CHECK(run_kinfer({"haplotypes", "--ped", ped, "--dat", dat, "--out",
                    (dir / "no" / "such" / "dir" / "h.txt").string()})
            .rc == 2);
  // the locus file given as the pedigree file
  CHECK(run_kinfer({"haplotypes", "--ped", dat, "--dat", ped}).rc == 2);
  // each marker consistent, but at theta 0 the father passes haplotype 1-1 to one child and
  // 1-2 to the other, and he is 1/2 at both markers: impossible
  write_input(dir,
              {{-1, -1, 1, {{1, 2}, {1, 2}}},
               {-1, -1, 2, {{1, 1}, {1, 1}}},
               {0, 1, 1, {{1, 1}, {1, 1}}},
               {0, 1, 2, {{1, 1}, {1, 2}}}},
              {{{0.5, 0.5}, {0.5, 0.5}}, {0.0}}, {0.0}, false);
  r = run_kinfer({"haplotypes", "--ped", ped, "--dat", dat});
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("no haplotype configuration has a positive probability"));
}

TEST_CASE("Haplotypes.SexLinkedBundledPedigree", "[linkage][apps]") {
  const auto dir = linkage_data_dir() / "variants";
  const ProcessResult r =
      run_kinfer({"haplotypes", "-q", "--ped", (dir / "xlinked5.pre").string(), "--dat",
                  (dir / "xlinked5.dat").string(), "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(!j["pedigrees"].empty());
  for (const auto& ped : j["pedigrees"]) {
    CHECK(ped["log10_probability"].get<double>() < 0);
    for (const auto& p : ped["persons"]) {
      // a male has no paternal X: null alleles (and origins); a daughter's paternal X is her
      // father's only one, his maternal
      for (std::size_t k = 0; k < p["maternal"].size(); ++k) {
        CHECK(p["maternal"][k].is_string());
        if (!p["founder"].get<bool>()) {
          if (p["paternal"][k].is_null())
            CHECK(p["paternal_origin"][k].is_null());
          else
            CHECK(p["paternal_origin"][k] == "M");
        }
      }
    }
  }
}

TEST_CASE("Haplotypes.MerlinInputAsLinkage", "[linkage][apps]") {
  // data/merlin/loop: the same analysis in MERLIN files and in LINKAGE files (thetas from the
  // cM positions by Haldane): the same haplotypes.
  const auto dir = data_dir() / "merlin" / "loop";
  const ProcessResult m = run_kinfer(
      {"haplotypes", "-q", "-p", (dir / "loop.ped").string(), "-d", (dir / "loop.dat").string(),
       "-m", (dir / "loop.map").string(), "-f", (dir / "loop.freq").string(), "--json"});
  const ProcessResult l =
      run_kinfer({"haplotypes", "-q", "-p", (dir / "loop.linkage.pre").string(), "-d",
                  (dir / "loop.linkage.dat").string(), "--json"});
  INFO(m.err << l.err);
  REQUIRE(m.rc == 0);
  REQUIRE(l.rc == 0);
  const auto jm = nlohmann::json::parse(m.out), jl = nlohmann::json::parse(l.out);
  REQUIRE(jm["chromosomes"].size() == 1);
  const auto& c = jm["chromosomes"][0];
  CHECK(c["chromosome"] == "1");
  CHECK(c["markers"] == jl["markers"]);
  REQUIRE(c["pedigrees"].size() == jl["pedigrees"].size());
  for (std::size_t p = 0; p < jl["pedigrees"].size(); ++p) {
    const auto &a = c["pedigrees"][p], &b = jl["pedigrees"][p];
    CHECK(std::abs(a["log10_probability"].get<double>() - b["log10_probability"].get<double>()) <
          1e-9);
    CHECK(a["persons"] == b["persons"]);
  }
}

TEST_CASE("Haplotypes.ConditionedUnderMaxMemory", "[linkage][apps]") {
  // 20 people over three generations, 14 untyped, three 3-allele markers. Under a --max-memory
  // below the whole plan's estimated peak (read from the unlimited run's log, 85% of it) the plan
  // is conditioned into slices: the same maximum (the configuration may be another of equal
  // probability).
  const auto dir = linkage_data_dir() / "variants";
  const std::vector<std::string> args = {"haplotypes", "--json", "--method", "network", "-p",
                                         (dir / "haplotypes_untyped.pre").string(), "-d",
                                         (dir / "haplotypes_untyped.dat").string()};
  const ProcessResult a = run_kinfer(args);
  REQUIRE(a.rc == 0);
  const std::string mark = "estimated peak ";
  const auto at = a.err.find(mark);
  INFO(a.err);
  REQUIRE(at != std::string::npos);
  const double peak_mib = std::stod(a.err.substr(at + mark.size()));
  REQUIRE(a.err.compare(a.err.find(' ', at + mark.size()), 4, " MiB") == 0);
  std::vector<std::string> limited = args;
  limited.insert(limited.end(),
                 {"--max-memory", std::to_string(static_cast<int>(0.85 * peak_mib)) + "M"});
  const ProcessResult b = run_kinfer(limited);
  INFO(b.err);
  REQUIRE(b.rc == 0);
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  CHECK(ja["pedigrees"][0]["slices"] == 1);
  CHECK(jb["pedigrees"][0]["slices"].get<int>() > 1);
  CHECK(std::abs(ja["log10_probability"].get<double>() - jb["log10_probability"].get<double>()) <
        1e-9);
  // far too little: exit 3 with the numbers
  limited.back() = "12M";
  const ProcessResult c = run_kinfer(limited);
  CHECK(c.rc == 3);
  CHECK_THAT(c.err, Catch::Contains("MiB"));
}

namespace {

// A random pedigree and data simulated from the model (so the data are consistent): two
// founders, then children of a random couple or a founder married to a non-founder (who then
// has a child next); each person typed at each marker with probability `typed`.
std::vector<Ind> random_pedigree(std::mt19937& rng, const Model& mo, int people, double typed) {
  std::uniform_real_distribution<double> u(0, 1);
  const int nm = static_cast<int>(mo.freq.size());
  std::vector<Ind> ped = {{-1, -1, 1, {}}, {-1, -1, 2, {}}};
  std::vector<std::pair<int, int>> couples = {{0, 1}};
  std::vector<char> married(people, 0);
  married[0] = married[1] = 1;
  while (static_cast<int>(ped.size()) < people) {
    const int n = static_cast<int>(ped.size());
    std::vector<int> single;
    for (int i = 2; i < n; ++i)
      if (!married[i]) single.push_back(i);
    if (!single.empty() && n + 2 <= people && u(rng) < 0.3) {
      const int x = single[rng() % single.size()];
      const int sex = ped[x].sex == 1 ? 2 : 1;
      ped.push_back({-1, -1, sex, {}});
      married[x] = married[n] = 1;
      couples.push_back(sex == 2 ? std::make_pair(x, n) : std::make_pair(n, x));
      ped.push_back({couples.back().first, couples.back().second, 1 + static_cast<int>(rng() % 2),
                     {}});
      continue;
    }
    const auto [f, m] = couples[rng() % couples.size()];
    ped.push_back({f, m, 1 + static_cast<int>(rng() % 2), {}});
  }
  // Simulated haplotypes: founders' alleles from the frequencies, meioses along the map.
  const int np = static_cast<int>(ped.size());
  std::vector<std::vector<std::array<int, 2>>> h(np, std::vector<std::array<int, 2>>(nm));
  for (int i = 0; i < np; ++i) {
    int sel[2] = {static_cast<int>(rng() % 2), static_cast<int>(rng() % 2)};
    for (int k = 0; k < nm; ++k)
      for (int side = 0; side < 2; ++side) {
        if (ped[i].father < 0) {
          std::discrete_distribution<int> d(mo.freq[k].begin(), mo.freq[k].end());
          h[i][k][side] = d(rng) + 1;
          continue;
        }
        if (k > 0 && u(rng) < mo.between(side, k - 1)) sel[side] ^= 1;
        h[i][k][side] = h[side == 0 ? ped[i].father : ped[i].mother][k][sel[side]];
      }
    for (int k = 0; k < nm; ++k)
      ped[i].typed.push_back(u(rng) < typed ? std::make_pair(h[i][k][0], h[i][k][1])
                                            : std::make_pair(0, 0));
  }
  return ped;
}

Model random_model(std::mt19937& rng, int markers) {
  std::uniform_real_distribution<double> u(0, 1);
  Model mo;
  for (int k = 0; k < markers; ++k) {
    const int n = 2 + static_cast<int>(rng() % 2);
    std::vector<double> f(n);
    double sum = 0;
    for (double& x : f) sum += x = 0.2 + u(rng);
    for (double& x : f) x /= sum;
    mo.freq.push_back(f);
  }
  const bool sexdiff = rng() % 2 == 0;
  for (int k = 0; k + 1 < markers; ++k) {
    mo.theta.push_back(0.01 + 0.3 * u(rng));
    if (sexdiff) mo.female.push_back(0.01 + 0.3 * u(rng));
  }
  return mo;
}

// Both paths on the same files: the same maximum to 1e-9; each reports the probability of its
// own configuration (checked by the caller when it can enumerate).
void check_paths_agree(const nlohmann::json& chain, const nlohmann::json& network) {
  REQUIRE(chain["pedigrees"].size() == network["pedigrees"].size());
  for (std::size_t p = 0; p < chain["pedigrees"].size(); ++p) {
    INFO("pedigree " << chain["pedigrees"][p]["id"]);
    CHECK(std::abs(chain["pedigrees"][p]["log10_probability"].get<double>() -
                   network["pedigrees"][p]["log10_probability"].get<double>()) < 1e-9);
  }
  CHECK(std::abs(chain["log10_probability"].get<double>() -
                 network["log10_probability"].get<double>()) < 1e-9);
}

nlohmann::json run_json(std::vector<std::string> args) {
  args.insert(args.begin(), "haplotypes");
  args.push_back("-q");
  args.push_back("--json");
  const ProcessResult r = run_kinfer(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("Haplotypes.ChainMatchesEnumerationAndNetwork", "[linkage][apps]") {
  // Random small pedigrees over 2-3 markers: the Lander-Green chain's Viterbi path (--method
  // chain) attains the enumeration's maximum, its configuration has the probability it reports
  // (recomputed here from the model's definition), and the network path finds the same maximum.
  std::mt19937 rng(36);
  for (int trial = 0; trial < 12; ++trial) {
    const Model mo = random_model(rng, 2 + trial % 2);
    const std::vector<Ind> ped = random_pedigree(rng, mo, 4 + trial % 3, 0.85);
    INFO("trial " << trial);
    const auto chain = check_against_enumeration(ped, mo, mo.theta, false, {"--method", "chain"});
    const auto network =
        check_against_enumeration(ped, mo, mo.theta, false, {"--method", "network"});
    check_paths_agree(chain, network);
  }
}

TEST_CASE("Haplotypes.ChainMatchesNetworkOnLargerRandomPedigrees", "[linkage][apps]") {
  // Beyond enumeration: 7-11 people, some untyped, 3-6 markers: the same maximum by both paths.
  std::mt19937 rng(3636);
  for (int trial = 0; trial < 10; ++trial) {
    const Model mo = random_model(rng, 3 + trial % 4);
    const std::vector<Ind> ped = random_pedigree(rng, mo, 7 + trial % 5, 0.7);
    INFO("trial " << trial);
    TempDir dir;
    write_input(dir, ped, mo, mo.theta, false);
    const auto chain = haplotypes(dir, {"--method", "chain"});
    const auto network = haplotypes(dir, {"--method", "network"});
    check_paths_agree(chain, network);
    // the chain's configuration has the probability it reports (the model's definition)
    const int nm = static_cast<int>(mo.freq.size());
    const double own = probability(ped, mo, reported(chain["pedigrees"][0], nm));
    CHECK(std::abs(chain["pedigrees"][0]["log10_probability"].get<double>() - std::log10(own)) <
          1e-9);
    // auto takes the chain here (few bits): the same output as --method chain
    CHECK(haplotypes(dir) == chain);
  }
}

TEST_CASE("Haplotypes.ChainMatchesNetworkOnBundledPedigrees", "[linkage][apps]") {
  // LINKAGE files shipped with kinfer: a loop, three generations, sex-linked, the FASTLINK
  // example and MERLIN input; both paths find the same maximum.
  const auto l = linkage_data_dir();
  const std::vector<std::vector<std::string>> inputs = {
      {"-p", (l / "variants" / "haplotypes.pre").string(), "-d",
       (l / "variants" / "haplotypes.dat").string()},
      {"-p", (l / "swiftlink" / "loop.ped").string(), "-d",
       (l / "swiftlink" / "loop.dat").string()},
      {"-p", (l / "variants" / "xlinked5.pre").string(), "-d",
       (l / "variants" / "xlinked5.dat").string()},
      {"-p", (l / "fastlink_example" / "pedfile.dat").string(), "-d",
       (l / "fastlink_example" / "datafile.dat").string()},
      {"-p", (data_dir() / "merlin" / "loop" / "loop.linkage.pre").string(), "-d",
       (data_dir() / "merlin" / "loop" / "loop.linkage.dat").string()},
      {"-p", (data_dir() / "merlin" / "xlinked" / "xlinked5.ped").string(), "-d",
       (data_dir() / "merlin" / "xlinked" / "xlinked5.dat").string(), "-m",
       (data_dir() / "merlin" / "xlinked" / "xlinked5.map").string(), "-f",
       (data_dir() / "merlin" / "xlinked" / "xlinked5.freq").string()}};
  for (const auto& in : inputs) {
    INFO(in[1]);
    std::vector<std::string> chain = in, network = in;
    chain.insert(chain.end(), {"--method", "chain"});
    network.insert(network.end(), {"--method", "network"});
    const auto c = run_json(chain), n = run_json(network);
    if (c.contains("chromosomes")) {  // MERLIN input: per chromosome
      REQUIRE(c["chromosomes"].size() == n["chromosomes"].size());
      for (std::size_t i = 0; i < c["chromosomes"].size(); ++i)
        check_paths_agree(c["chromosomes"][i], n["chromosomes"][i]);
    } else {
      check_paths_agree(c, n);
    }
  }
}

TEST_CASE("Haplotypes.MethodOptions", "[linkage][apps]") {
  // A Kosambi map over exactly three markers (FASTLINK's interference) has no chain: auto runs
  // the network, --method chain is refused with exit 3; --bits 0 sends auto to the network.
  TempDir dir;
  const std::vector<Ind> ped = {{-1, -1, 1, {{1, 2}, {1, 2}, {1, 2}}},
                                {-1, -1, 2, {{1, 1}, {1, 2}, {2, 2}}},
                                {0, 1, 1, {{1, 2}, {1, 1}, {1, 2}}},
                                {0, 1, 2, {{1, 1}, {2, 2}, {1, 2}}}};
  const Model mo{{{0.5, 0.5}, {0.4, 0.6}, {0.3, 0.7}}, {0.1, 0.2}};
  write_input(dir, ped, mo, mo.theta, false);
  const ProcessResult bad =
      run_kinfer({"haplotypes", "-q", "-p", (dir / "h.pre").string(), "-d",
                  (dir / "h.dat").string(), "--method", "fast"});
  CHECK(bad.rc == 2);
  const auto a = haplotypes(dir);
  const auto c = haplotypes(dir, {"--method", "chain"});
  const auto n = haplotypes(dir, {"--method", "network"});
  CHECK(a == c);
  CHECK(haplotypes(dir, {"--bits", "0"}) == n);
  check_paths_agree(c, n);
  // Kosambi (the locus file's interference field 2)
  std::string dat = read_text(dir / "h.dat");
  const auto at = dat.find("\n0 0\n");
  REQUIRE(at != std::string::npos);
  dat.replace(at, 5, "\n0 2\n");
  write_text(dir / "h.dat", dat);
  CHECK(haplotypes(dir) == haplotypes(dir, {"--method", "network"}));
  const ProcessResult r = run_kinfer({"haplotypes", "-q", "-p", (dir / "h.pre").string(), "-d",
                                      (dir / "h.dat").string(), "--method", "chain"});
  CHECK(r.rc == 3);
  CHECK_THAT(r.err, Catch::Contains("Kosambi"));
}

TEST_CASE("Haplotypes.ChainCheckpointsUnderMaxMemory", "[linkage][apps]") {
  // 15-17 bits over 60 markers: with every marker's vector kept, and under a --max-memory that
  // holds only checkpoints and one block (recomputed in the traceback), the same output; far
  // too little memory for the chain: exit 3 with --method chain. (The limit must stay above
  // the program's own footprint, which the one-marker plans check.)
  std::mt19937 rng(7);
  const Model mo = random_model(rng, 60);
  std::vector<Ind> ped;
  for (int b = 0; b < 15 || b > 17;) {  // bits: 2 per non-founder, less 1 per founder parent
    ped = random_pedigree(rng, mo, 16, 0.9);
    std::set<int> parents;
    b = 0;
    for (const Ind& x : ped)
      if (x.father >= 0) b += 2, parents.insert(x.father), parents.insert(x.mother);
    for (int q : parents) b -= ped[q].father < 0;
  }
  TempDir dir;
  write_input(dir, ped, mo, mo.theta, false);
  const std::vector<std::string> args = {"haplotypes", "--json", "--method", "chain", "-p",
                                         (dir / "h.pre").string(), "-d",
                                         (dir / "h.dat").string()};
  const ProcessResult a = run_kinfer(args);
  INFO(a.err);
  REQUIRE(a.rc == 0);
  CHECK(a.err.find("checkpoints every") == std::string::npos);
  // the bits from the log: a limit of 48 vectors (the 61 kept need 4 times the limit) keeps
  // checkpoints only
  const std::string mark = "(Viterbi), ";
  const auto at = a.err.find(mark);
  REQUIRE(at != std::string::npos);
  const int bits = std::stoi(a.err.substr(at + mark.size()));
  CHECK(bits >= 12);
  std::vector<std::string> limited = args;
  limited.insert(limited.end(),
                 {"--max-memory", std::to_string(static_cast<long>(std::exp2(bits) * 8 * 48))});
  const ProcessResult b = run_kinfer(limited);
  INFO(b.err);
  REQUIRE(b.rc == 0);
  CHECK_THAT(b.err, Catch::Contains("checkpoints every"));
  CHECK(nlohmann::json::parse(a.out) == nlohmann::json::parse(b.out));
  // the reported configuration's probability, from the model's definition
  const auto j = nlohmann::json::parse(b.out);
  const double own = log10_probability(ped, mo, reported(j["pedigrees"][0], 60));
  CHECK(std::abs(j["log10_probability"].get<double>() - own) < 1e-9);
  limited.back() = std::to_string(static_cast<long>(std::exp2(bits) * 8 * 2));
  const ProcessResult c = run_kinfer(limited);
  CHECK(c.rc == 3);
  CHECK_THAT(c.err, Catch::Contains("Lander-Green chain"));
}

TEST_CASE("Haplotypes.ChainMatchesNetworkBeyondOneRegion", "[linkage][apps]") {
  // More state bits than one kernel region (11): a three-generation pedigree of 14-17 bits over
  // 4 markers, and a sibship of 13 (24 bits) whose founders' groups of 12 bits each span two
  // regions (their own pass): the same maximum by both paths, and the chain's configuration
  // has the probability it prints.
  std::mt19937 rng(1711);
  std::vector<std::pair<std::vector<Ind>, Model>> cases;
  {
    const Model mo = random_model(rng, 4);
    cases.emplace_back(random_pedigree(rng, mo, 14, 0.8), mo);
  }
  {
    const Model mo = random_model(rng, 3);
    std::vector<Ind> ped = {{-1, -1, 1, {}}, {-1, -1, 2, {}}};
    for (int c = 0; c < 13; ++c) ped.push_back({0, 1, 1 + c % 2, {}});
    // data from a simulation of the same family
    std::vector<Ind> sim = random_pedigree(rng, mo, 2, 1.0);  // two founders' genotypes
    ped[0].typed = sim[0].typed, ped[1].typed = sim[1].typed;
    std::uniform_real_distribution<double> u(0, 1);
    for (int c = 2; c < 15; ++c) {
      int sel[2] = {static_cast<int>(rng() % 2), static_cast<int>(rng() % 2)};
      for (int k = 0; k < 3; ++k) {
        int al[2];
        for (int side = 0; side < 2; ++side) {
          if (k > 0 && u(rng) < mo.between(side, k - 1)) sel[side] ^= 1;
          const auto [a, b] = ped[side].typed[k];
          al[side] = sel[side] == 0 ? a : b;  // the founder's listed alleles taken as its phase
        }
        ped[c].typed.push_back(u(rng) < 0.85 ? std::make_pair(al[0], al[1]) : std::make_pair(0, 0));
      }
    }
    cases.emplace_back(ped, mo);
  }
  for (const auto& [ped, mo] : cases) {
    TempDir dir;
    write_input(dir, ped, mo, mo.theta, false);
    const ProcessResult r =
        run_kinfer({"haplotypes", "--json", "--method", "chain", "-p", (dir / "h.pre").string(),
                    "-d", (dir / "h.dat").string()});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const std::string mark = "(Viterbi), ";
    const auto at = r.err.find(mark);
    REQUIRE(at != std::string::npos);
    CHECK(std::stoi(r.err.substr(at + mark.size())) > 11);
    const auto chain = nlohmann::json::parse(r.out);
    check_paths_agree(chain, haplotypes(dir, {"--method", "network"}));
    const double own = log10_probability(ped, mo, reported(chain["pedigrees"][0],
                                                           static_cast<int>(mo.freq.size())));
    CHECK(std::abs(chain["log10_probability"].get<double>() - own) < 1e-9);
  }
}
