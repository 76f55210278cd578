// [fastlink] kinfer's LOD scores against FASTLINK itself: each case runs `unknown`, then
// `mlink` or `linkmap`, in a temporary folder, reads outfile.dat and compares ln L per pedigree
// and evaluation (1e-6; LOD differences where FASTLINK's loop breakers add a constant).
// Exits 77 (meson: SKIP) when FASTLINK is not installed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "engine/errors.hpp"
#include "io/linkage.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer;
using namespace kinfer::linkage_test;

namespace {

struct FlEval {
  std::vector<double> male, female;
  std::vector<double> ln_l;  // per pedigree, in file order
};

std::vector<double> numbers_after(const std::string& line, std::size_t from) {
  std::istringstream s(line.substr(from));
  std::vector<double> v;
  double x;
  while (s >> x) v.push_back(x);
  return v;
}

// Runs FASTLINK on a locus file and a post-makeped pedigree text; returns its evaluations.
std::vector<FlEval> run_fastlink(const fs::path& dat, const std::string& post_ped,
                                 Program program) {
  TempDir dir;
  fs::copy_file(dat, dir / "datafile.dat");
  write_text(dir / "pedfile.dat", post_ped);
  const std::string prog = program == Program::Mlink ? "mlink" : "linkmap";
  const ProcessResult r = run_shell(dir.path(), "timeout 300 unknown && timeout 300 " + prog);
  INFO(r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0));
  REQUIRE(r.rc == 0);
  std::istringstream out(read_text(dir / "outfile.dat"));
  std::vector<FlEval> evals;
  for (std::string line; std::getline(out, line);) {
    std::istringstream s(line);
    std::string first;
    if (!(s >> first)) continue;
    if (first == "THETAS") {
      evals.push_back({numbers_after(line, line.find("THETAS") + 6), {}, {}});
      evals.back().female = evals.back().male;
    } else if (first == "MALE") {
      evals.push_back({numbers_after(line, line.find("THETAS") + 6), {}, {}});
    } else if (first == "FEMALE") {
      evals.back().female = numbers_after(line, line.find("THETAS") + 6);
    } else if (!evals.empty() && std::all_of(first.begin(), first.end(), ::isdigit)) {
      double ln;
      if (s >> ln) evals.back().ln_l.push_back(ln);
    }
  }
  return evals;
}

struct Case {
  std::string name, dat, ped;
  Program program;
  bool loops = false;  // FASTLINK's loop breakers add a constant to ln L: compare differences
};

void compare(const Case& c) {
  INFO("case " << c.name);
  const fs::path dat = linkage_data_dir() / c.dat, ped = linkage_data_dir() / c.ped;
  const LocusFile lf = io::read_locus_file(dat.string());
  const PedigreeFile pf = io::read_pedigree_file(ped.string(), lf);
  // FASTLINK reads post-makeped files only; ours are written by kinfer's own writer.
  const std::string post = pf.post_makeped ? read_text(ped) : io::format_post_makeped(pf, lf);
  const std::vector<FlEval> fl = run_fastlink(dat, post, c.program);

  AnalysisOptions o = quick_options();
  o.program = c.program;
  const AnalysisResult r = analyze(lf, pf, o);
  std::vector<const Evaluation*> ours;
  if (c.program == Program::Mlink) ours.push_back(&r.baseline);
  for (const auto& e : r.evaluations) ours.push_back(&e);
  REQUIRE(fl.size() == ours.size());
  for (std::size_t i = 0; i < fl.size(); ++i) {
    INFO("evaluation " << i);
    // FASTLINK prints thetas with three decimals (and LINKMAP's flanking ones recomputed).
    REQUIRE(fl[i].male.size() >= ours[i]->male.size());
    for (std::size_t t = 0; t < ours[i]->male.size(); ++t) {
      CHECK(fl[i].male[t] == Approx(ours[i]->male[t]).margin(6e-4));
      if (lf.sex_difference == 0 || c.program == Program::Mlink)
        CHECK(fl[i].female[t] == Approx(ours[i]->female[t]).margin(6e-4));
    }
    REQUIRE(fl[i].ln_l.size() == ours[i]->ln_l.size());
    for (std::size_t p = 0; p < fl[i].ln_l.size(); ++p) {
      INFO("pedigree " << r.pedigrees[p]);
      if (c.loops)
        CHECK(fl[i].ln_l[p] - fl[0].ln_l[p] ==
              Approx(ours[i]->ln_l[p] - ours[0]->ln_l[p]).margin(2e-6));
      else
        CHECK(fl[i].ln_l[p] == Approx(ours[i]->ln_l[p]).margin(1e-6));
    }
  }
}

}  // namespace

TEST_CASE("LinkageFastlink.Mlink", "[fastlink]") {
  const std::vector<Case> cases = {
      {"Debian example, 3 loci", "fastlink_example/datafile.dat", "fastlink_example/pedfile.dat",
       Program::Mlink},
      {"two-point", "variants/twopoint.dat", "variants/twopoint.ped", Program::Mlink},
      {"sex difference 2", "variants/sexdiff2.dat", "variants/twopoint.ped", Program::Mlink},
      {"sex difference 1", "variants/sexdiff1.dat", "variants/twopoint.ped", Program::Mlink},
      {"three loci, Kosambi", "variants/kosambi3.dat", "fastlink_example/pedfile.dat",
       Program::Mlink},
      {"X-linked, 5 loci", "variants/xlinked5.dat", "variants/xlinked5.pre", Program::Mlink},
      {"loop, 4 loci", "variants/loop_grid.dat", "variants/loop_breaker.ped", Program::Mlink, true},
  };
  for (const Case& c : cases) compare(c);
}

TEST_CASE("LinkageFastlink.Linkmap", "[fastlink]") {
  const std::vector<Case> cases = {
      {"interior", "variants/linkmap_interior.dat", "fastlink_example/pedfile.dat",
       Program::Linkmap},
      {"left exterior", "variants/linkmap_left.dat", "fastlink_example/pedfile.dat",
       Program::Linkmap},
      {"right exterior", "variants/linkmap_right.dat", "fastlink_example/pedfile.dat",
       Program::Linkmap},
      {"interior, Kosambi", "variants/linkmap_kosambi.dat", "fastlink_example/pedfile.dat",
       Program::Linkmap},
  };
  for (const Case& c : cases) compare(c);
}

TEST_CASE("LinkageFastlink.AnalyticPedigrees", "[fastlink]") {
  // The closed-form cases without loops (FASTLINK needs loop breakers for the others).
  for (const char* name :
       {"C01_nuclear_founder_hom", "C02_nuclear_founder_het", "C03_nuclear_two_founders",
        "C04_nuclear_trio_forced_het_child", "C06_trio_all_het", "C07_trio_mother_untyped",
        "C08_sibs_both_hom", "C09_three_generations"})
    compare({name, std::string("analytic/") + name + ".dat",
             std::string("analytic/") + name + ".pre", Program::Mlink});
}

TEST_CASE("LinkageFastlink.ReferenceNumbers", "[fastlink]") {
  // linkage-model.md 3.1, two-point Schizophrenia x p105-599Ha: per-pedigree ln L and LODs.
  const LocusFile lf = io::read_locus_file((linkage_data_dir() / "variants/twopoint.dat").string());
  const PedigreeFile pf =
      io::read_pedigree_file((linkage_data_dir() / "variants/twopoint.ped").string(), lf);
  AnalysisOptions o = quick_options();
  o.thetas = {0.0, 0.05, 0.10, 0.20, 0.40};
  const AnalysisResult r = analyze(lf, pf, o);
  CHECK(r.baseline.ln_l[0] == Approx(-31.556105).margin(1e-6));
  CHECK(r.baseline.ln_l[1] == Approx(-26.958621).margin(1e-6));
  CHECK(r.evaluations[0].ln_l[0] == Approx(-28.483454).margin(1e-6));
  CHECK(r.evaluations[0].ln_l[1] == Approx(-24.783332).margin(1e-6));
  const double lods[] = {2.279146, 1.942130, 1.588959, 0.837036, -0.165381};
  for (int i = 0; i < 5; ++i)  // FASTLINK divides by 2.30259, not ln 10: 5e-5
    CHECK(AnalysisResult::lod(r.evaluations[i].total_ln_l, r.baseline.total_ln_l) ==
          Approx(lods[i]).margin(5e-5));
}

int main(int argc, char** argv) {
  if (std::system("command -v unknown >/dev/null 2>&1 && command -v mlink >/dev/null 2>&1 && "
                  "command -v linkmap >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "FASTLINK (Debian package fastlink) is not installed: skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
