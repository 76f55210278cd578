// [linkage][apps] `kinfer genotypes` end to end: posterior genotype probabilities and the error
// check against an enumeration written here from first principles (every ordered genotype of
// every person, founders from the allele frequencies, each meiosis passing either parental allele
// with probability 1/2), independent of kinfer's network code.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_linkage_support.hpp"

using namespace kinfer::linkage_test;

namespace {

struct Ind {
  int father = -1, mother = -1;  // index, -1 for a founder
  int sex = 1;
  int a1 = 0, a2 = 0;  // observed alleles (1-based), 0 untyped
};

std::string label(int a, int b) {
  if (a > b) std::swap(a, b);
  return std::to_string(a) + "/" + std::to_string(b);
}

// A person's genotype as kinfer labels it: a sex-linked male has his maternal allele alone.
std::string label_of(const Ind& x, int p, int m, bool sex_linked) {
  return sex_linked && x.sex == 1 ? std::to_string(m) : label(p, m);
}

// P(unordered genotype of each person | the observed genotypes), by enumeration. Sex-linked: a
// male has only a maternal allele (his paternal one is enumerated as allele 1 alone), a
// daughter's paternal allele is her father's.
std::vector<std::map<std::string, double>> enumerate(const std::vector<Ind>& ped,
                                                     const std::vector<double>& freq,
                                                     bool sex_linked = false) {
  const int np = static_cast<int>(ped.size()), n = static_cast<int>(freq.size());
  std::vector<std::map<std::string, double>> post(np);
  std::vector<int> g(np, 0);  // ordered genotype p * n + m, 0-based alleles
  double total = 0;
  for (;;) {
    double w = 1;
    for (int i = 0; i < np && w > 0; ++i) {
      const int p = g[i] / n, m = g[i] % n;
      const Ind& x = ped[i];
      const bool hemi = sex_linked && x.sex == 1;
      if (x.a1 && label_of(x, p + 1, m + 1, sex_linked) != label_of(x, x.a1, x.a2, sex_linked))
        w = 0;
      if (hemi && p != 0) w = 0;
      if (x.father < 0) {
        w *= (hemi ? 1.0 : freq[p]) * freq[m];
        continue;
      }
      const int fp = g[x.father] / n, fm = g[x.father] % n;
      const int mp = g[x.mother] / n, mm = g[x.mother] % n;
      const double from_father =
          hemi ? 1.0 : sex_linked ? (p == fm ? 1.0 : 0.0) : 0.5 * (p == fp) + 0.5 * (p == fm);
      w *= from_father * (0.5 * (m == mp) + 0.5 * (m == mm));
    }
    if (w > 0) {
      total += w;
      for (int i = 0; i < np; ++i)
        post[i][label_of(ped[i], g[i] / n + 1, g[i] % n + 1, sex_linked)] += w;
    }
    int i = np - 1;
    for (; i >= 0; --i) {
      if (++g[i] < n * n) break;
      g[i] = 0;
    }
    if (i < 0) break;
  }
  REQUIRE(total > 0);
  for (auto& m : post)
    for (auto& [k, v] : m) v /= total;
  return post;
}

// P(person's observed genotype | everyone else's observed genotypes).
double given_others(std::vector<Ind> ped, const std::vector<double>& freq, int i,
                    bool sex_linked = false) {
  const std::string obs = label_of(ped[i], ped[i].a1, ped[i].a2, sex_linked);
  ped[i].a1 = ped[i].a2 = 0;
  const auto post = enumerate(ped, freq, sex_linked);
  const auto it = post[i].find(obs);
  return it == post[i].end() ? 0.0 : it->second;
}

// A LINKAGE locus file (an affection locus nobody's status is known at, then the marker) and a
// pre-makeped pedigree file (people named 1, 2, ... in order), into `dir`.
void write_input(const TempDir& dir, const std::vector<Ind>& ped, const std::vector<double>& freq,
                 bool sex_linked = false) {
  std::string dat = std::string(sex_linked ? "2 0 1 5" : "2 0 0 5") +
                    "\n0 0.0 0.0 0\n1 2\n1 2\n0.999 0.001\n1\n0.0 1.0 1.0\n" +
                    (sex_linked ? "0.0 1.0\n" : "") + "3 " + std::to_string(freq.size()) + "\n";
  for (double f : freq) dat += std::to_string(f) + " ";
  dat += "\n0 0\n0.1\n1 0.1 0.45\n";
  write_text(dir / "g.dat", dat);
  std::string text;
  for (std::size_t i = 0; i < ped.size(); ++i) {
    const Ind& x = ped[i];
    text += "1 " + std::to_string(i + 1) + " " + std::to_string(x.father + 1) + " " +
            std::to_string(x.mother + 1) + " " + std::to_string(x.sex) + " 0 " +
            std::to_string(x.a1) + " " + std::to_string(x.a2) + "\n";
  }
  write_text(dir / "g.pre", text);
}

nlohmann::json genotypes(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"genotypes", "-q", "--ped", (dir / "g.pre").string(), "--dat",
                                   (dir / "g.dat").string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult r = run_kinfer(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return nlohmann::json::parse(r.out);
}

// Every person's posterior and every typed person's P(observed | others) against the
// enumeration, single-marker and --multipoint (one marker: the chain over it alone, or with
// --bits 0 the pedigree network).
void check_against_enumeration(const std::vector<Ind>& ped, const std::vector<double>& freq,
                               bool sex_linked = false) {
  TempDir dir;
  write_input(dir, ped, freq, sex_linked);
  const std::vector<std::vector<std::string>> modes = {
      {}, {"--multipoint"}, {"--multipoint", "--bits", "0"}};
  for (const auto& mode : modes) {
    INFO("mode " << (mode.empty() ? "single-marker" : mode.back()));
    const auto j = genotypes(dir, mode);
    const auto want = enumerate(ped, freq, sex_linked);
    const auto& people = j["pedigrees"][0]["people"];
    REQUIRE(people.size() == ped.size());
    for (std::size_t i = 0; i < ped.size(); ++i) {
      INFO("person " << i + 1);
      const auto& m = people[i]["markers"][0];
      CHECK(m["marker"] == "locus2");
      double sum = 0;
      for (auto& [g, p] : m["genotypes"].items()) {
        INFO("genotype " << g);
        CHECK(p.get<double>() == Approx(want[i].count(g) ? want[i].at(g) : 0.0).margin(1e-12));
        sum += p.get<double>();
      }
      CHECK(sum == Approx(1.0).margin(1e-12));
      for (auto& [g, p] : want[i])
        if (p > 1e-15) CHECK(m["genotypes"].contains(g));
      if (ped[i].a1) {
        CHECK(m["observed"] == label_of(ped[i], ped[i].a1, ped[i].a2, sex_linked));
        CHECK(m["p_given_others"].get<double>() ==
              Approx(given_others(ped, freq, static_cast<int>(i), sex_linked)).margin(1e-12));
      } else {
        CHECK(m["observed"].is_null());
      }
    }
  }
}

}  // namespace

TEST_CASE("Genotypes.TrioAgainstEnumeration", "[linkage][apps]") {
  // father untyped, mother 2/3, child 1/2
  check_against_enumeration({{-1, -1, 1, 0, 0}, {-1, -1, 2, 2, 3}, {0, 1, 1, 1, 2}},
                            {0.2, 0.3, 0.5});
}

TEST_CASE("Genotypes.NuclearFamilyAgainstEnumeration", "[linkage][apps]") {
  // father 1/2, mother untyped, children 1/3, untyped, 1/1, untyped
  check_against_enumeration({{-1, -1, 1, 1, 2},
                             {-1, -1, 2, 0, 0},
                             {0, 1, 1, 1, 3},
                             {0, 1, 2, 0, 0},
                             {0, 1, 2, 1, 1},
                             {0, 1, 1, 0, 0}},
                            {0.2, 0.3, 0.5});
}

TEST_CASE("Genotypes.FirstCousinMarriageAgainstEnumeration", "[linkage][apps]") {
  // grandparents 1 x 2; their children 3 (x spouse 5) and 4 (x spouse 6); cousins 7 x 8 have
  // children 9 and 10: a loop.
  check_against_enumeration({{-1, -1, 1, 2, 2},
                             {-1, -1, 2, 0, 0},
                             {0, 1, 1, 0, 0},
                             {0, 1, 2, 0, 0},
                             {-1, -1, 2, 0, 0},
                             {-1, -1, 1, 0, 0},
                             {2, 4, 1, 1, 2},
                             {5, 3, 2, 0, 0},
                             {6, 7, 1, 1, 1},
                             {6, 7, 2, 1, 2}},
                            {0.3, 0.7});
}

TEST_CASE("Genotypes.SexLinkedAgainstEnumeration", "[linkage][apps]") {
  // X-linked: father 2 (hemizygous), mother untyped; son 1, daughter 2/3, daughter untyped, son
  // untyped; a grandson (daughter 4's son, father untyped) typed 3.
  check_against_enumeration({{-1, -1, 1, 2, 2},
                             {-1, -1, 2, 0, 0},
                             {0, 1, 1, 1, 1},
                             {0, 1, 2, 2, 3},
                             {0, 1, 2, 0, 0},
                             {0, 1, 1, 0, 0},
                             {-1, -1, 1, 0, 0},
                             {6, 3, 1, 3, 3}},
                            {0.2, 0.3, 0.5}, true);
}

TEST_CASE("Genotypes.FlagsPlantedError", "[linkage][apps]") {
  // Three generations: grandmother 1/1, grandfather untyped; their son (untyped) and his
  // untyped wife have five children typed 1/2. Child 9's genotype is changed to 3/3: possible
  // (both parents could carry a 3) but improbable given the other four.
  std::vector<Ind> ped = {{-1, -1, 1, 0, 0}, {-1, -1, 2, 1, 1}, {0, 1, 1, 0, 0},
                          {-1, -1, 2, 0, 0}, {2, 3, 1, 1, 2},  {2, 3, 2, 1, 2},
                          {2, 3, 1, 1, 2},   {2, 3, 2, 1, 2},  {2, 3, 1, 3, 3}};
  const std::vector<double> freq = {0.3, 0.3, 0.4};
  const double threshold = 0.05;
  const int planted = 8;
  // the enumeration says the planted genotype alone falls below the threshold
  for (int i = 0; i < static_cast<int>(ped.size()); ++i)
    if (ped[i].a1) {
      INFO("person " << i + 1);
      const double q = given_others(ped, freq, i);
      CHECK((q < threshold) == (i == planted));
      CHECK(q > 0);
    }
  TempDir dir;
  write_input(dir, ped, freq);
  const auto j = genotypes(dir, {"--error-threshold", "0.05"});
  REQUIRE(j["suspect"].size() == 1);
  const auto& s = j["suspect"][0];
  CHECK(s["pedigree"] == "1");
  CHECK(s["person"] == "9");
  CHECK(s["marker"] == "locus2");
  CHECK(s["observed"] == "3/3");
  CHECK(s["p_given_others"].get<double>() ==
        Approx(given_others(ped, freq, planted)).margin(1e-12));
  CHECK(s["population_frequency"].get<double>() == Approx(0.16));
  // the correct genotypes before the change: nothing flagged
  ped[planted].a1 = 1, ped[planted].a2 = 2;
  write_input(dir, ped, freq);
  CHECK(genotypes(dir, {"--error-threshold", "0.05"})["suspect"].empty());
}

TEST_CASE("Genotypes.MendelianErrorIsFlaggedNotRefused", "[linkage][apps]") {
  // Parents 1/1 and 1/1, child 2/2: no posterior at the marker, and the error check finds
  // P = 0 for each genotype whose removal makes the rest consistent.
  const auto dir = linkage_data_dir() / "analytic";
  const ProcessResult r = run_kinfer({"genotypes", "--ped",
                                      (dir / "C05_nuclear_mendel_error.pre").string(), "--dat",
                                      (dir / "C05_nuclear_mendel_error.dat").string(), "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.err, Catch::Contains("Mendelian"));
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> flagged;
  for (const auto& s : j["suspect"]) {
    CHECK(s["p_given_others"].get<double>() == 0.0);
    flagged.insert(s["person"].get<std::string>());
  }
  CHECK(flagged.count("3") == 1);
  for (const auto& p : j["pedigrees"][0]["people"]) CHECK(p["markers"][0]["genotypes"].is_null());
}

TEST_CASE("Genotypes.TextOutFileAndBadInput", "[linkage][apps]") {
  TempDir dir;
  write_input(dir, {{-1, -1, 1, 1, 2}, {-1, -1, 2, 0, 0}, {0, 1, 1, 2, 2}}, {0.5, 0.5});
  const ProcessResult r = run_kinfer({"genotypes", "-q", "--ped", (dir / "g.pre").string(),
                                      "--dat", (dir / "g.dat").string(), "--out",
                                      (dir / "g.txt").string()});
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("pedigree 1") && Catch::Contains("suspect genotypes"));
  CHECK(read_text(dir / "g.txt") == r.out);
  // a missing file, a bad option value: exit 2
  CHECK(run_kinfer({"genotypes", "--ped", (dir / "none.pre").string(), "--dat",
                    (dir / "g.dat").string()})
            .rc == 2);
  CHECK(run_kinfer({"genotypes", "--ped", (dir / "g.pre").string(), "--dat",
                    (dir / "g.dat").string(), "--error-threshold", "2"})
            .rc == 2);
  CHECK(run_kinfer({"genotypes", "--dat", (dir / "g.dat").string()}).rc == 2);
}

namespace {

// Three SNPs 1 cM apart, twelve people: father 1/2 at each, mother 1/1, eight children with the
// father's haplotype 1-1-1 or 2-2-2 whole, child 11 1/2 at each, child 12 1/1, 1/2, 1/1 (a double
// recombinant at marker 2). `some_untyped`: children 3-10 each untyped at one marker.
void write_double_recombinant(const TempDir& dir, bool some_untyped) {
  write_text(dir / "g.dat",
             "3 0 0 5\n0 0.0 0.0 0\n1 2 3\n"
             "3 2\n0.5 0.5\n3 2\n0.5 0.5\n3 2\n0.5 0.5\n0 0\n0.01 0.01\n1 0.1 0.45\n");
  std::string ped = "1 1 0 0 1 1 2 1 2 1 2\n1 2 0 0 2 1 1 1 1 1 1\n";
  for (int c = 3; c <= 10; ++c)
    ped += "1 " + std::to_string(c) + " 1 2 " + std::to_string(1 + c % 2) +
           (c % 2 ? (some_untyped ? " 1 1 0 0 1 1\n" : " 1 1 1 1 1 1\n")
                  : (some_untyped ? " 1 2 1 2 0 0\n" : " 1 2 1 2 1 2\n"));
  ped += "1 11 1 2 1 1 2 1 2 1 2\n1 12 1 2 2 1 1 1 2 1 1\n";
  write_text(dir / "g.pre", ped);
}

}  // namespace

TEST_CASE("Genotypes.MultipointFlagsDoubleRecombinant", "[linkage][apps]") {
  // Three SNPs 1 cM apart. Father 1/2 at each, mother 1/1; eight children carry the father's
  // haplotype 1-1-1 or 2-2-2 whole (so his phase is clear). Child 12 is 1/1, 1/2, 1/1: possible
  // at marker 2 alone (P = 1/2 given the parents), but it takes a recombination on either side
  // of marker 2 in one meiosis (about 0.01^2 against no recombination): only the multipoint
  // check flags it, and only it (its markers 1 and 3, each one recombination away from the
  // other two, have P about 0.01: above the threshold of 0.005).
  TempDir dir;
  write_double_recombinant(dir, false);
  const auto single = genotypes(dir, {"--error-threshold", "0.005"});
  CHECK(single["suspect"].empty());
  const auto multi = genotypes(dir, {"--error-threshold", "0.005", "--multipoint"});
  REQUIRE(multi["suspect"].size() == 1);
  CHECK(multi["suspect"][0]["person"] == "12");
  CHECK(multi["suspect"][0]["marker"] == "locus2");
  CHECK(multi["suspect"][0]["p_given_others"].get<double>() < 1e-3);
  CHECK(multi["pedigrees"][0]["chain_bits"].get<int>() > 0);
}

TEST_CASE("Genotypes.MultipointBeyondBitsByTheNetwork", "[linkage][apps]") {
  // A pedigree beyond --bits goes through the pedigree network: the chain's answers (three
  // SNPs 1 cM apart, twelve people, 18 bits: a double recombinant at marker 2), the same
  // suspect.
  TempDir dir;
  write_double_recombinant(dir, true);
  const auto chain = genotypes(dir, {"--error-threshold", "0.005", "--multipoint"});
  const auto net =
      genotypes(dir, {"--error-threshold", "0.005", "--multipoint", "--bits", "17"});
  CHECK(chain["pedigrees"][0]["multipoint_by"] == "chain");
  CHECK(chain["pedigrees"][0]["chain_bits"] == 18);
  CHECK(net["pedigrees"][0]["multipoint_by"] == "network");
  CHECK(net["pedigrees"][0]["ln_likelihood"].get<double>() ==
        Approx(chain["pedigrees"][0]["ln_likelihood"].get<double>()).epsilon(1e-12));
  const auto& a = chain["pedigrees"][0]["people"];
  const auto& b = net["pedigrees"][0]["people"];
  REQUIRE(a.size() == b.size());
  int untyped = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < 3; ++k) {
      INFO("person " << i + 1 << ", marker " << k + 1);
      const auto& x = a[i]["markers"][k];
      const auto& y = b[i]["markers"][k];
      CHECK(x["genotypes"].size() == y["genotypes"].size());
      for (auto& [g, p] : x["genotypes"].items())
        CHECK(y["genotypes"].value(g, -1.0) == Approx(p.get<double>()).margin(1e-12));
      if (x["observed"].is_null())
        ++untyped;
      else
        CHECK(y["p_given_others"].get<double>() ==
              Approx(x["p_given_others"].get<double>()).margin(1e-12));
    }
  CHECK(untyped == 8);
  REQUIRE(net["suspect"].size() == chain["suspect"].size());
  REQUIRE_FALSE(net["suspect"].empty());
  for (std::size_t s = 0; s < net["suspect"].size(); ++s) {
    CHECK(net["suspect"][s]["person"] == chain["suspect"][s]["person"]);
    CHECK(net["suspect"][s]["marker"] == chain["suspect"][s]["marker"]);
  }
}

TEST_CASE("Genotypes.MerlinInputAsItsLinkageConversion", "[linkage][apps]") {
  // data/merlin's examples and their LINKAGE conversions (the map's positions as Haldane
  // recombination fractions): the same posteriors and error checks, single-marker and
  // multipoint; MERLIN's name each pedigree's chromosome.
  auto run = [](std::vector<std::string> args, const std::string& mode) {
    if (!mode.empty()) args.push_back(mode);
    const ProcessResult r = run_kinfer(args);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    return nlohmann::json::parse(r.out);
  };
  for (const std::string name : {"loop/loop", "xlinked/xlinked5"})
    for (const std::string mode : {"", "--multipoint"}) {
      INFO(name << " " << mode);
      const std::string base = (data_dir() / "merlin" / name).string();
      nlohmann::json m = run({"genotypes", "-q", "--json", "-d", base + ".dat", "-p",
                              base + ".ped", "-m", base + ".map", "-f", base + ".freq"},
                             mode);
      const nlohmann::json l = run(
          {"genotypes", "-q", "--json", "-d", base + ".linkage.dat", "-p", base + ".linkage.pre"},
          mode);
      CHECK(m["map"] == base + ".map");
      REQUIRE(m["pedigrees"].size() == l["pedigrees"].size());
      for (auto& p : m["pedigrees"]) {
        CHECK(p["chromosome"].is_string());
        p.erase("chromosome");
      }
      for (auto& s : m["suspect"]) s.erase("chromosome");
      for (std::size_t k = 0; k < l["pedigrees"].size(); ++k) {
        const nlohmann::json &a = m["pedigrees"][k], &b = l["pedigrees"][k];
        CHECK(a["id"] == b["id"]);
        if (b.contains("ln_likelihood") && b["ln_likelihood"].is_number())
          CHECK(a["ln_likelihood"].get<double>() ==
                Approx(b["ln_likelihood"].get<double>()).epsilon(1e-10));
        REQUIRE(a["people"].size() == b["people"].size());
        for (std::size_t i = 0; i < b["people"].size(); ++i)
          for (std::size_t j = 0; j < b["people"][i]["markers"].size(); ++j) {
            const nlohmann::json &x = a["people"][i]["markers"][j],
                                 &y = b["people"][i]["markers"][j];
            INFO("pedigree " << b["id"] << " person " << b["people"][i]["id"] << " marker "
                             << y["marker"]);
            CHECK(x["observed"] == y["observed"]);
            REQUIRE(x["genotypes"].is_null() == y["genotypes"].is_null());
            if (!y["genotypes"].is_null()) {
              REQUIRE(x["genotypes"].size() == y["genotypes"].size());
              for (auto it = y["genotypes"].begin(); it != y["genotypes"].end(); ++it)
                CHECK(x["genotypes"][it.key()].get<double>() ==
                      Approx(it.value().get<double>()).epsilon(1e-10));
            }
            if (y.contains("p_given_others") && y["p_given_others"].is_number())
              CHECK(x["p_given_others"].get<double>() ==
                    Approx(y["p_given_others"].get<double>()).epsilon(1e-10));
          }
      }
      CHECK(m["suspect"].size() == l["suspect"].size());
    }
}
