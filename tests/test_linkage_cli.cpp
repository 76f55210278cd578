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
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // .ci/run installs it
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
  CHECK_THAT(r.err, Catch::Contains("exceeds the limit"));
}
