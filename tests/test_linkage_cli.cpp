// [linkage][apps] `kinfer lod` end to end: text, JSON, exit codes, error messages, the picture.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_linkage_support.hpp"

using namespace kinfer::linkage_test;

namespace {

ProcessResult lod(std::vector<std::string> args) {
  args.insert(args.begin(), {"lod", "--order", "minfill"});
  return run_kinfer(args);
}

std::string example(const std::string& f) {
  return (linkage_data_dir() / "fastlink_example" / f).string();
}

}  // namespace

TEST_CASE("LinkageCli.JsonMlink", "[linkage][apps]") {
  const ProcessResult r =
      lod({"--ped", example("pedfile.dat"), "--dat", example("datafile.dat"), "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["program"] == "mlink");
  REQUIRE(j["evaluations"].size() == 3);
  const auto& e = j["evaluations"][0];
  CHECK(e["thetas"][0].get<double>() == Approx(0.1197));
  CHECK(e["thetas"][1].get<double>() == Approx(0.125));
  REQUIRE(e["pedigrees"].size() == 2);
  CHECK(e["pedigrees"][0]["id"] == "1");
  CHECK(e["pedigrees"][0]["ln_l"].get<double>() == Approx(-41.974522).margin(1e-6));
  CHECK(e["pedigrees"][1]["ln_l"].get<double>() == Approx(-33.265532).margin(1e-6));
  CHECK(e["pedigrees"][0]["log10_l"].get<double>() ==
        Approx(-41.974522 / std::log(10.0)).margin(1e-6));
  CHECK(e["pedigrees"][0]["lod"].get<double>() == Approx(0.214781).margin(5e-5));
  CHECK(e["total"]["ln_l"].get<double>() == Approx(-75.240053).margin(1e-6));
  CHECK(e["total"]["lod"].get<double>() == Approx(0.163739).margin(5e-5));
}

TEST_CASE("LinkageCli.TextLikeFastlink", "[linkage][apps]") {
  const ProcessResult r = lod(
      {"--ped", example("pedfile.dat"), "--dat", example("datafile.dat"), "--theta", "0:0.5:0.1"});
  REQUIRE(r.rc == 0);
  CHECK(lines_with(r.out, "THETAS").size() == 7);  // the baseline and six thetas
  CHECK(r.out.find("-75.617075") != std::string::npos);
  CHECK(r.out.find("TOTALS") != std::string::npos);
}

TEST_CASE("LinkageCli.LinkmapJsonHasPositions", "[linkage][apps]") {
  const ProcessResult r =
      lod({"--ped", example("pedfile.dat"), "--dat",
           (linkage_data_dir() / "variants/linkmap_interior.dat").string(), "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["program"] == "linkmap");
  REQUIRE(j["evaluations"].size() == 5);
  CHECK(j["evaluations"][0]["position"].get<double>() == Approx(0.0).margin(1e-9));
  CHECK(j["evaluations"][0]["total"]["lod"].get<double>() == Approx(2.258).margin(1e-3));
}

TEST_CASE("LinkageCli.MendelianErrorExits2", "[linkage][apps]") {
  const auto dir = linkage_data_dir() / "analytic";
  const ProcessResult r = lod({"--ped", (dir / "C05_nuclear_mendel_error.pre").string(), "--dat",
                               (dir / "C05_nuclear_mendel_error.dat").string()});
  CHECK(r.rc == 2);
  CHECK(r.out.find("-inf") == std::string::npos);
  CHECK_THAT(r.err, Catch::Contains("Mendelian") && Catch::Contains("pedigree 1") &&
                        Catch::Contains("locus 2"));
}

TEST_CASE("LinkageCli.BadInputExits2WithPlace", "[linkage][apps]") {
  TempDir t;
  write_text(t / "bad.dat", "2 0 0 5\n0 0 0 0\n1 2\n0 2\n0.5 0.5\n");
  const ProcessResult r = lod({"--ped", example("pedfile.dat"), "--dat", (t / "bad.dat").string()});
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("bad.dat:4:") && Catch::Contains("quantitative"));
  const ProcessResult m =
      lod({"--ped", (t / "missing.ped").string(), "--dat", example("datafile.dat")});
  CHECK(m.rc == 2);
}

TEST_CASE("LinkageCli.PlotAndOutFolder", "[linkage][apps]") {
  // gnuplot is a dependency of the tests (scripts/install-deps.sh): missing, the test fails
  REQUIRE(std::system("command -v gnuplot >/dev/null 2>&1") == 0);
  TempDir t;
  const ProcessResult r =
      lod({"--ped", example("pedfile.dat"), "--dat",
           (linkage_data_dir() / "variants/linkmap_interior.dat").string(), "--plot",
           (t / "curve.svg").string(), "--out", (t / "res").string()});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string svg = read_text(t / "curve.svg");
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("LOD score") != std::string::npos);
  CHECK(svg.find("LOD 3") != std::string::npos);  // the threshold, in the legend
  CHECK(fs::exists(t / "res" / "lod.json"));
  CHECK(fs::exists(t / "res" / "lod.txt"));
  const ProcessResult png = lod({"--ped", example("pedfile.dat"), "--dat", example("datafile.dat"),
                                 "--plot", (t / "curve.png").string()});
  REQUIRE(png.rc == 0);
  CHECK(read_text(t / "curve.png").substr(1, 3) == "PNG");
}

TEST_CASE("LinkageCli.MemoryLimitExits3", "[linkage][apps]") {
  const ProcessResult r = lod(
      {"--ped", example("pedfile.dat"), "--dat", example("datafile.dat"), "--max-memory", "1K"});
  CHECK(r.rc == 3);
  CHECK_THAT(r.err, Catch::Contains("--max-memory 1 KiB is below what any plan needs"));
}

// Three simulated families of 8, 25 and 45 people (7, 26 and 54 bits): under the default --bits
// 24 the first takes the Lander-Green chain, the others the network, the 45-person one beyond
// the chain's 40-bit ceiling. Every pedigree's ln L at every position must equal the
// network-only run's (--bits 0), an identity between two independent elimination paths.
TEST_CASE("LinkageCli.MultipointBigFamilyTakesTheNetwork", "[linkage][apps]") {
  const auto dir = linkage_data_dir() / "mixed_bits";
  const std::vector<std::string> common = {"--ped",     (dir / "mixed.ped").string(),
                                           "--dat",     (dir / "mixed.dat").string(),
                                           "--program", "linkmap",
                                           "--positions", "0:20:5",
                                           "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return lod(a);
  };
  const ProcessResult dflt = with({}), net = with({"--bits", "0"});
  INFO(dflt.err);
  REQUIRE(dflt.rc == 0);

  REQUIRE(net.rc == 0);
  const auto a = nlohmann::json::parse(dflt.out), b = nlohmann::json::parse(net.out);
  REQUIRE(a["pedigree_bits"].size() == 3);
  CHECK(a["pedigree_bits"][0]["bits"].get<int>() <= 24);
  CHECK(a["pedigree_bits"][1]["bits"].get<int>() > 24);
  CHECK(a["pedigree_bits"][2]["bits"].get<int>() > 40);
  // the chain ran for the small family only
  CHECK_THAT(a["notes"].dump(), Catch::Contains("chain) for 1 of 3 pedigrees"));
  REQUIRE(a["evaluations"].size() == 5);
  REQUIRE(b["evaluations"].size() == 5);
  for (std::size_t e = 0; e < 5; ++e)
    for (std::size_t p = 0; p < 3; ++p)
      CHECK(a["evaluations"][e]["pedigrees"][p]["ln_l"].get<double>() ==
            Approx(b["evaluations"][e]["pedigrees"][p]["ln_l"].get<double>()).margin(1e-7));
}

// LINKAGE reports speak of what ran: MLINK names the marker of each theta in the summary and
// says nothing of inheritance-vector bits (no chain runs there); LINKMAP says per pedigree
// whether the chain or the network computed it, and nothing of MERLIN.
TEST_CASE("LinkageCli.ReportsSayWhatRan", "[linkage][apps]") {
  const ProcessResult m =
      lod({"--ped", example("pedfile.dat"), "--dat", example("datafile.dat")});
  REQUIRE(m.rc == 0);
  INFO(m.out);
  const auto rows = lines_with(m.out, "0.1250 ");
  REQUIRE(!rows.empty());
  CHECK_THAT(rows.back(), Catch::StartsWith("p105-153Ra/XbaI"));
  CHECK(m.out.find("BITS") == std::string::npos);
  CHECK(m.out.find("MERLIN") == std::string::npos);
  const auto dir = linkage_data_dir() / "mixed_bits";
  const ProcessResult l =
      lod({"--ped", (dir / "mixed.ped").string(), "--dat", (dir / "mixed.dat").string(),
           "--program", "linkmap", "--positions", "0:10:10"});
  REQUIRE(l.rc == 0);
  INFO(l.out);
  CHECK(l.out.find("MERLIN") == std::string::npos);
  CHECK(lines_with(l.out, "chain (7 bits)").size() == 1);
  CHECK(lines_with(l.out, "network").size() >= 2);
}

// A chain of 19 bits takes the GPU under --device auto when there is one; a machine without one
// is a normal machine: under -q nothing is said about it (the chain runs on the CPU).
TEST_CASE("LinkageCli.NoGpuIsNotAWarning", "[linkage][apps]") {
  const auto dir = linkage_data_dir() / "mixed_bits";
  const ProcessResult r =
      lod({"--ped", (dir / "chain19.ped").string(), "--dat", (dir / "chain19.dat").string(),
           "--program", "linkmap", "--positions", "0:15:5", "-q", "--json"});
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["pedigree_bits"].size() == 1);
  CHECK(j["pedigree_bits"][0]["method"] == "chain");
  CHECK(j["pedigree_bits"][0]["chain_bits"].get<int>() >= 18);
  CHECK(r.err.empty());
}
