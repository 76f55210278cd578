// [engine] The linkage network against closed forms and against an independent computation
// (Lander-Green by brute force), and the reductions that must not change the likelihood.
#include <catch2/catch.hpp>
#include <random>

#include "engine/errors.hpp"
#include "io/linkage.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer;
using namespace kinfer::linkage_test;

namespace {

struct Data {
  LocusFile lf;
  PedigreeFile pf;
};

Data load(const std::string& dat, const std::string& ped) {
  Data d;
  d.lf = io::read_locus_file((linkage_data_dir() / dat).string());
  d.pf = io::read_pedigree_file((linkage_data_dir() / ped).string(), d.lf);
  return d;
}

std::vector<std::string> split_tab(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : line) {
    if (c == '\t') {
      f.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  f.push_back(cur);
  return f;
}

// Every ln L of an analysis: baseline, then each evaluation, per pedigree.
std::vector<double> all_ln(const AnalysisResult& r) {
  std::vector<double> v = r.baseline.ln_l;
  for (const auto& e : r.evaluations) v.insert(v.end(), e.ln_l.begin(), e.ln_l.end());
  return v;
}

}  // namespace

TEST_CASE("LinkageNetwork.ClosedForms", "[engine]") {
  const auto dir = linkage_data_dir() / "analytic";
  std::istringstream tsv(read_text(dir / "EXPECTED.tsv"));
  std::string line;
  std::getline(tsv, line);  // header
  int cases = 0;
  while (std::getline(tsv, line)) {
    if (line.empty()) continue;
    const auto f = split_tab(line);
    REQUIRE(f.size() >= 6);
    const std::string name = f[0];
    const double expected = std::stod(f[2]);
    const std::string files = f[5];
    const std::string pre = files.substr(0, files.find(',')),
                      dat = files.substr(files.find(',') + 1);
    INFO(name);
    const LocusFile lf = io::read_locus_file((dir / dat).string());
    const PedigreeFile pf = io::read_pedigree_file((dir / pre).string(), lf);
    if (expected == 0) {
      // C05: a Mendelian error, reported with the pedigree, the locus and the individuals.
      try {
        analyze(lf, pf, quick_options());
        FAIL("expected a Mendelian inconsistency error");
      } catch (const InputError& e) {
        const std::string m = e.what();
        CHECK_THAT(m, Catch::Contains("Mendelian") && Catch::Contains("pedigree 1") &&
                          Catch::Contains("locus 2") && Catch::Contains(" 1 (") &&
                          Catch::Contains(" 2 (") && Catch::Contains(" 3 ("));
      }
      ++cases;
      continue;
    }
    const AnalysisResult r = analyze(lf, pf, quick_options());
    // The trait is unknown everywhere: every theta gives the marker's likelihood.
    for (double ln : all_ln(r)) CHECK(std::exp(ln) == Approx(expected).epsilon(1e-9));
    // And so does the brute-force inheritance-vector sum.
    const double lg = lander_green(pf.pedigrees[0], lf, lf.map_order, {0.1}, {0.1});
    CHECK(std::exp(lg) == Approx(expected).epsilon(1e-9));
    ++cases;
  }
  CHECK(cases == 15);
}

TEST_CASE("LinkageNetwork.ReductionsKeepTheLikelihood", "[engine]") {
  const std::vector<std::pair<std::string, std::string>> sets = {
      {"fastlink_example/datafile.dat", "fastlink_example/pedfile.dat"},
      {"variants/loop_grid.dat", "swiftlink/loop.ped"},
      {"variants/xlinked5.dat", "variants/xlinked5.pre"},
      {"variants/sexdiff2.dat", "variants/twopoint.ped"}};
  for (const auto& [dat, ped] : sets) {
    INFO(dat);
    const Data d = load(dat, ped);
    std::vector<double> ref;
    for (int recode = 0; recode < 2; ++recode)
      for (int elim = 0; elim < 2; ++elim)
        for (int joint = 0; joint < 2; ++joint) {
          AnalysisOptions o = quick_options();
          o.reduction.recode = recode;
          o.reduction.eliminate = elim;
          o.reduction.joint_genotypes = joint;
          const std::vector<double> v = all_ln(analyze(d.lf, d.pf, o));
          if (ref.empty()) {
            ref = v;
            continue;
          }
          REQUIRE(v.size() == ref.size());
          INFO("recode " << recode << " eliminate " << elim << " joint " << joint);
          for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(ref[i]).margin(1e-9));
        }
  }
}

TEST_CASE("LinkageNetwork.MatchesLanderGreen", "[engine]") {
  // A marriage loop over four loci (trait and three markers), and an X-linked pedigree over
  // five and over eleven loci.
  const std::vector<std::pair<std::string, std::string>> sets = {
      {"variants/loop_grid.dat", "swiftlink/loop.ped"},
      {"variants/xlinked5.dat", "variants/xlinked5.pre"},
      {"swiftlink/xlinked.dat", "swiftlink/xlinked.ped"}};
  for (const auto& [dat, ped] : sets) {
    INFO(dat);
    const Data d = load(dat, ped);
    const AnalysisResult r = analyze(d.lf, d.pf, quick_options());
    std::vector<const Evaluation*> evals{&r.baseline};
    for (const auto& e : r.evaluations) evals.push_back(&e);
    for (const Evaluation* e : evals) {
      const double lg = lander_green(d.pf.pedigrees[0], d.lf, d.lf.map_order, e->male, e->female);
      CHECK(e->ln_l[0] == Approx(lg).margin(1e-9));
    }
  }
}

namespace {

// A random pedigree with inbreeding or loops likely, phenotypes simulated (so consistent) and
// partly untyped; 3 loci: affection with 2 liability classes, then two markers.
std::pair<LocusFile, PedigreeFile> random_case(std::mt19937& rng, bool x_linked) {
  std::ostringstream dat;
  dat << "3 0 " << (x_linked ? 1 : 0) << " 5\n0 0.0 0.0 0\n2 1 3\n";
  dat << "1 2\n0.7 0.3\n2\n0.05 0.6 0.9\n";
  if (x_linked) dat << "0.05 0.9\n";
  dat << "0.2 0.5 0.7\n";
  if (x_linked) dat << "0.2 0.7\n";
  dat << "3 3\n0.2 0.3 0.5\n3 2\n0.45 0.55\n";
  std::uniform_real_distribution<double> U(0, 1);
  const int sexdiff = x_linked ? 0 : static_cast<int>(rng() % 2) * 2;
  dat << sexdiff << " 0\n" << 0.02 + 0.3 * U(rng) << ' ' << 0.02 + 0.3 * U(rng) << '\n';
  if (sexdiff == 2) dat << 0.02 + 0.3 * U(rng) << ' ' << 0.02 + 0.3 * U(rng) << '\n';
  dat << "1 0.1 0.5\n";
  LocusFile lf = io::parse_locus_file("random.dat", dat.str());

  struct P {
    int fa, mo, sex;
    std::array<std::array<int, 2>, 3> g;  // per locus (input order): paternal, maternal
  };
  std::vector<P> ps;
  const int founders = 3 + static_cast<int>(rng() % 2);
  auto draw = [&](int k) {
    const auto& f = lf.loci[k].freq;
    double u = U(rng), c = 0;
    for (std::size_t a = 0; a < f.size(); ++a)
      if ((c += f[a]) >= u) return static_cast<int>(a) + 1;
    return static_cast<int>(f.size());
  };
  for (int i = 0; i < founders; ++i) {
    P p{-1, -1, i % 2 == 0 ? 1 : 2, {}};
    for (int k = 0; k < 3; ++k) p.g[k] = {draw(k), draw(k)};
    ps.push_back(p);
  }
  const int kids = 3 + static_cast<int>(rng() % 3);
  for (int c = 0; c < kids; ++c) {
    std::vector<int> men, women;
    for (int i = 0; i < static_cast<int>(ps.size()); ++i)
      (ps[i].sex == 1 ? men : women).push_back(i);
    const int fa = men[rng() % men.size()], mo = women[rng() % women.size()];
    P p{fa, mo, static_cast<int>(rng() % 2) + 1, {}};
    for (int k = 0; k < 3; ++k) {
      p.g[k][0] = ps[fa].g[k][rng() % 2];
      p.g[k][1] = ps[mo].g[k][rng() % 2];
      if (x_linked) p.g[k][0] = p.sex == 1 ? 0 : ps[fa].g[k][1];
    }
    ps.push_back(p);
  }
  std::ostringstream ped;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const P& p = ps[i];
    ped << "7 " << i + 1 << ' ' << p.fa + 1 << ' ' << p.mo + 1 << ' ' << p.sex;
    // Affection: random status (every status has positive penetrance), class 1 or 2.
    ped << ' ' << rng() % 3 << ' ' << 1 + rng() % 2;
    for (int k = 1; k < 3; ++k) {
      if (U(rng) < 0.3) {
        ped << " 0 0";
      } else if (x_linked && p.sex == 1) {
        ped << ' ' << p.g[k][1] << ' ' << p.g[k][1];
      } else {
        ped << ' ' << p.g[k][0] << ' ' << p.g[k][1];
      }
    }
    ped << '\n';
  }
  PedigreeFile pf = io::parse_pedigree_file("random.ped", ped.str(), lf);
  return {lf, pf};
}

}  // namespace

TEST_CASE("LinkageNetwork.RandomPedigreesMatchLanderGreen", "[engine]") {
  std::mt19937 rng(20240611);
  int loops = 0;
  for (int t = 0; t < 40; ++t) {
    const bool x = t % 4 == 3;
    auto [lf, pf] = random_case(rng, x);
    loops += pf.pedigrees[0].has_loop;
    INFO("case " << t << (x ? " (X-linked)" : ""));
    AnalysisOptions o = quick_options();
    o.thetas = {0.0, 0.05, 0.25, 0.5};
    AnalysisResult r;
    try {
      r = analyze(lf, pf, o);
    } catch (const InputError& e) {
      FAIL(e.what());
    }
    for (const auto& e : r.evaluations) {
      const double lg = lander_green(pf.pedigrees[0], lf, lf.map_order, e.male, e.female);
      if (std::isinf(lg))
        CHECK(std::isinf(e.ln_l[0]));
      else
        CHECK(e.ln_l[0] == Approx(lg).margin(1e-9));
    }
  }
  CHECK(loops > 5);  // the generator makes inbreeding and loops often
}

TEST_CASE("LinkageNetwork.CompileOnceEqualsFreshBuilds", "[engine]") {
  const Data d = load("fastlink_example/datafile.dat", "fastlink_example/pedfile.dat");
  AnalysisOptions grid = quick_options();
  grid.thetas = {0.0, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5};
  const AnalysisResult g = analyze(d.lf, d.pf, grid);
  // One plan per pedigree for the whole grid; one run per pedigree and evaluation.
  CHECK(g.timing.plans == 2);
  CHECK(g.timing.runs == 2 * 8);
  for (std::size_t i = 0; i < grid.thetas.size(); ++i) {
    AnalysisOptions one = quick_options();
    one.thetas = {grid.thetas[i]};
    const AnalysisResult s = analyze(d.lf, d.pf, one);
    for (int p = 0; p < 2; ++p)
      CHECK(g.evaluations[i].ln_l[p] == Approx(s.evaluations[0].ln_l[p]).margin(1e-10));
  }
}

TEST_CASE("LinkageNetwork.MendelianErrorsNameTheFamily", "[engine]") {
  const LocusFile lf = io::read_locus_file((linkage_data_dir() / "variants/twopoint.dat").string());
  std::string ped = read_text(linkage_data_dir() / "variants/twopoint.ped");
  // Person 15 of pedigree 1 (father 11: 1/3, mother 10: 1/1) typed 3/3 at the marker.
  const std::string from = "1 15 11 10 0 16 16 1 0 1 1";
  REQUIRE(ped.find(from) != std::string::npos);
  ped.replace(ped.find(from), from.size(), "1 15 11 10 0 16 16 1 0 3 3");
  const PedigreeFile pf = io::parse_pedigree_file("bad.ped", ped, lf);
  try {
    analyze(lf, pf, quick_options());
    FAIL("expected a Mendelian inconsistency");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("pedigree 1, locus 1 (p105-599Ha/TaqI)") &&
                      Catch::Contains("11 (1/3") && Catch::Contains("10 (1/1") &&
                      Catch::Contains("15 (3/3"));
  }
}

TEST_CASE("LinkageNetwork.LinkmapAgainstReferenceNumbers", "[engine]") {
  // linkage-model.md 3.1: the trait moved across p105-599Ha -(0.1197)- p105-153Ra.
  const Data d = load("variants/linkmap_interior.dat", "fastlink_example/pedfile.dat");
  const AnalysisResult r = analyze(d.lf, d.pf, quick_options());
  REQUIRE(r.program == Program::Linkmap);
  REQUIRE(r.evaluations.size() == 5);
  CHECK(r.baseline.total_ln_l == Approx(-75.617075).margin(1e-6));  // unlinked
  CHECK(r.evaluations.front().total_ln_l / 2.30259 == Approx(-30.581845).margin(2e-6));
  CHECK(r.evaluations.back().total_ln_l / 2.30259 == Approx(-32.262668).margin(2e-6));
  const double peak = AnalysisResult::lod(r.evaluations.front().total_ln_l, r.baseline.total_ln_l);
  CHECK(peak == Approx(2.258).margin(1e-3));
  CHECK(*r.evaluations.front().position == Approx(0).margin(1e-12));
  // Map positions through the same interval give the same numbers.
  AnalysisOptions o = quick_options();
  const double d_ac = 100 * theta_to_morgans(0.1197, MapFunction::Haldane);
  o.positions = {0.0, d_ac};
  const AnalysisResult m = analyze(d.lf, d.pf, o);
  CHECK(m.evaluations[0].total_ln_l == Approx(r.evaluations.front().total_ln_l).margin(1e-9));
  CHECK(m.evaluations[1].total_ln_l == Approx(r.evaluations.back().total_ln_l).margin(1e-9));
}

TEST_CASE("LinkageNetwork.MultipointAcrossManyMarkers", "[engine]") {
  // Eleven loci (FASTLINK stops at 8): the trait moved across all ten markers, each position
  // checked against Lander-Green.
  const Data d = load("swiftlink/xlinked.dat", "swiftlink/xlinked.ped");
  AnalysisOptions o = quick_options();
  o.program = Program::Linkmap;
  o.moving_locus = 1;
  o.positions = {-5.0, 0.0, 12.5, 40.0, 77.0, 100.0, 130.0};
  // Both ways: the inheritance chain (default) and the network (lander_green_bits 0).
  AnalysisOptions net = o;
  net.lander_green_bits = 0;
  const AnalysisResult rn = analyze(d.lf, d.pf, net);
  const AnalysisResult r = analyze(d.lf, d.pf, o);
  REQUIRE(r.evaluations.size() == o.positions.size());
  REQUIRE(rn.evaluations.size() == o.positions.size());
  CHECK(r.baseline.total_ln_l == Approx(rn.baseline.total_ln_l).margin(1e-9));
  for (std::size_t i = 0; i < r.evaluations.size(); ++i)
    CHECK(r.evaluations[i].total_ln_l == Approx(rn.evaluations[i].total_ln_l).margin(1e-9));
  for (const auto& e : r.evaluations) {
    std::vector<int> chain;
    for (const auto& name : e.order)
      for (int k = 0; k < d.lf.n_loci(); ++k)
        if (d.lf.loci[k].name == name) chain.push_back(k);
    REQUIRE(chain.size() == 11);
    const double lg = lander_green(d.pf.pedigrees[0], d.lf, chain, e.male, e.female);
    CHECK(e.ln_l[0] == Approx(lg).margin(1e-9));
  }
  // The baseline factorises: trait alone times the markers alone.
  CHECK(rn.timing.plans >= 2 + 3);
  CHECK(r.timing.plans == 1);  // the trait alone; the chain has no plan
}

TEST_CASE("LinkageNetwork.ConditionedUnderAMemoryLimit", "[engine]") {
  // `kinfer lod --max-memory` below what the plans need: they are conditioned, every theta
  // (position) refills the source tables and each slice is cut from them; the likelihoods equal
  // the unconditioned ones and FASTLINK's (linkage-model.md 3.1).
  struct Set {
    const char *dat, *ped;
    std::vector<double> thetas;
  };
  for (const Set& s :
       {Set{"fastlink_example/datafile.dat", "fastlink_example/pedfile.dat", {}},
        Set{"fastlink_example/datafile.dat", "fastlink_example/pedfile.dat", {0.0, 0.05, 0.2, 0.5}},
        Set{"variants/linkmap_interior.dat", "fastlink_example/pedfile.dat", {}}}) {
    const Data d = load(s.dat, s.ped);
    AnalysisOptions o = quick_options();
    o.thetas = s.thetas;
    const AnalysisResult whole = analyze(d.lf, d.pf, o);
    REQUIRE(whole.timing.conditioned == 0);
    // The smallest limit that still plans (below it: ResourceError), by bisection: there the
    // largest plans cannot keep their intermediate tables whole.
    double lo = 0, hi = whole.timing.peak_bytes;
    for (int i = 0; i < 24; ++i) {
      o.plan.max_memory_bytes = (lo + hi) / 2;
      try {
        analyze(d.lf, d.pf, o);
        hi = o.plan.max_memory_bytes;
      } catch (const ResourceError&) {
        lo = o.plan.max_memory_bytes;
      }
    }
    o.plan.max_memory_bytes = hi;
    const AnalysisResult lim = analyze(d.lf, d.pf, o);
    INFO(s.dat << " thetas " << s.thetas.size() << ": limit " << hi << ", unconditioned peak "
               << whole.timing.peak_bytes << ", " << lim.timing.conditioned
               << " plans conditioned, at most " << lim.timing.max_slices << " slices");
    CHECK(lim.timing.conditioned >= 1);
    CHECK(lim.timing.max_slices >= 2);
    CHECK(lim.timing.peak_bytes <= hi);
    REQUIRE(lim.evaluations.size() == whole.evaluations.size());
    CHECK(lim.baseline.total_ln_l == Approx(whole.baseline.total_ln_l).margin(1e-9));
    for (std::size_t e = 0; e < whole.evaluations.size(); ++e)
      for (std::size_t p = 0; p < whole.evaluations[e].ln_l.size(); ++p)
        CHECK(lim.evaluations[e].ln_l[p] == Approx(whole.evaluations[e].ln_l[p]).margin(1e-9));
    if (std::string(s.dat).find("linkmap") != std::string::npos) {
      CHECK(lim.baseline.total_ln_l == Approx(-75.617075).margin(1e-6));
      CHECK(lim.evaluations.front().total_ln_l / 2.30259 == Approx(-30.581845).margin(2e-6));
    } else if (s.thetas.empty()) {  // MLINK at the locus file's theta (0.1197)
      CHECK(lim.evaluations[0].ln_l[0] == Approx(-41.974522).margin(1e-6));
      CHECK(lim.evaluations[0].ln_l[1] == Approx(-33.265532).margin(1e-6));
    }
  }
}
