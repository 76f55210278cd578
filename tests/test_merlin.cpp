// [linkage][merlin] (command-line ones also [apps]) MERLIN-format input and HLOD: the same analyses
// from MERLIN and LINKAGE files (data/merlin/, written by scripts/linkage_to_merlin.py from
// data/linkage/), a bad file of every MERLIN type with its place, HLOD against closed forms,
// frequencies counted from data.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/errors.hpp"
#include "io/merlin.hpp"
#include "linkage/hlod.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer::linkage_test;
using nlohmann::json;

namespace {

ProcessResult lod(std::vector<std::string> args) {
  args.insert(args.begin(), {"lod", "--order", "minfill"});
  return run_kinfer(args);
}

std::string merlin(const std::string& f) { return (data_dir() / "merlin" / f).string(); }

json run_json(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("--json");
  const ProcessResult r = lod(a);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

std::vector<std::string> merlin_args(const std::string& dir, const std::string& name,
                                     bool freq = true) {
  const std::string p = dir + "/" + name;
  std::vector<std::string> a = {"-d", merlin(p + ".dat"), "-p",      merlin(p + ".ped"),
                                "-m", merlin(p + ".map"), "--model", merlin(p + ".model")};
  if (freq) a.insert(a.end(), {"-f", merlin(p + ".freq")});
  return a;
}

std::string g17(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

// MERLIN multipoint (args) against LINKAGE LINKMAP at the same positions, from the first
// marker: every position's total and per-family LOD, HLOD and alpha to 1e-8.
void same_multipoint(const std::string& dir, const std::string& name,
                     const std::vector<std::string>& position_args, std::size_t expect_points) {
  std::vector<std::string> a = merlin_args(dir, name);
  a.insert(a.end(), position_args.begin(), position_args.end());
  const json m = run_json(a);
  REQUIRE(m["analyses"].size() == 1);
  const json& an = m["analyses"][0];
  CHECK(an["analysis"] == "multipoint");
  const double first = an["markers"][0]["position"].get<double>();
  const json& pts = an["points"];
  REQUIRE(pts.size() == expect_points);
  std::string positions;
  for (const auto& p : pts) {
    if (!positions.empty()) positions.push_back(',');
    positions.append(g17(p["position"].get<double>() - first));
  }
  const std::string p = merlin(dir + "/" + name);
  const json l = run_json(
      {"--dat", p + ".linkage.dat", "--ped", p + ".linkage.pre", "--positions", positions});
  REQUIRE(l["program"] == "linkmap");
  REQUIRE(l["evaluations"].size() == pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const json& e = l["evaluations"][i];
    INFO("position " << pts[i]["position"].get<double>());
    CHECK(e["position"].get<double>() + first ==
          Approx(pts[i]["position"].get<double>()).margin(1e-9));
    CHECK(pts[i]["lod"].get<double>() == Approx(e["total"]["lod"].get<double>()).margin(1e-8));
    CHECK(pts[i]["hlod"].get<double>() == Approx(e["total"]["hlod"].get<double>()).margin(1e-8));
    CHECK(pts[i]["alpha"].get<double>() == Approx(e["total"]["alpha"].get<double>()).margin(1e-6));
    for (const auto& ped : e["pedigrees"])
      CHECK(pts[i]["family_lods"][ped["id"].get<std::string>()].get<double>() ==
            Approx(ped["lod"].get<double>()).margin(1e-8));
  }
}

}  // namespace

TEST_CASE("Merlin.SameLodsAsLinkage.LoopMultipoint", "[linkage][merlin][apps]") {
  // SwiftLink's looped pedigree, markers at 10, 20, 30 cM; two positions between markers.
  same_multipoint("loop", "loop", {"--steps", "2"}, 7);
}

TEST_CASE("Merlin.SameLodsAsLinkage.FastlinkGridBeyondMarkers", "[linkage][merlin][apps]") {
  // FASTLINK's example, markers at 5 and 18.68 cM; a grid from 0 to 25 cM reaches past both.
  same_multipoint("fastlink", "fastlink", {"--grid", "2.5", "--start", "0", "--stop", "25"}, 11);
}

TEST_CASE("Merlin.SameLodsAsLinkage.XLinked", "[linkage][merlin][apps]") {
  same_multipoint("xlinked", "xlinked5", {"--steps", "1"}, 7);
}

TEST_CASE("Merlin.SameLodsAsLinkage.TwoPoint", "[linkage][merlin][apps]") {
  const json m = run_json([] {
    auto a = merlin_args("fastlink", "fastlink");
    a.insert(a.end(), {"--singlepoint", "--theta", "0,0.05,0.1,0.3"});
    return a;
  }());
  const json& pts = m["analyses"][0]["points"];
  REQUIRE(pts.size() == 8);  // 2 markers x 4 thetas
  for (const std::string marker : {"p105-599Ha", "p105-153Ra"}) {
    const std::string p = merlin("fastlink/fastlink.linkage." + marker);
    const json l =
        run_json({"--dat", p + ".dat", "--ped", p + ".pre", "--theta", "0,0.05,0.1,0.3"});
    REQUIRE(l["evaluations"].size() == 4);
    int seen = 0;
    for (const auto& pt : pts) {
      if (pt["marker"] != marker) continue;
      const json& e = l["evaluations"][seen++];
      CHECK(pt["theta"].get<double>() == Approx(e["thetas"][0].get<double>()).margin(1e-12));
      CHECK(pt["lod"].get<double>() == Approx(e["total"]["lod"].get<double>()).margin(1e-8));
      CHECK(pt["hlod"].get<double>() == Approx(e["total"]["hlod"].get<double>()).margin(1e-8));
      for (const auto& ped : e["pedigrees"])
        CHECK(pt["family_lods"][ped["id"].get<std::string>()].get<double>() ==
              Approx(ped["lod"].get<double>()).margin(1e-8));
    }
    CHECK(seen == 4);
  }
}

TEST_CASE("Merlin.ReportHasPeakBitsAndEstimatedFrequencies", "[linkage][merlin][apps]") {
  auto a = merlin_args("fastlink", "fastlink", false);
  const ProcessResult r = lod(a);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("PEAK LOD:") && Catch::Contains("PEAK HLOD:") &&
                        Catch::Contains("BITS (2n-f)") &&
                        Catch::Contains("beyond MERLIN's 24 bits") &&
                        Catch::Contains("estimated from the data"));
  CHECK_THAT(r.err, Catch::Contains("counted over all genotyped"));
  a.push_back("--json");
  const ProcessResult j = lod(a);
  REQUIRE(j.rc == 0);
  const json m = json::parse(j.out);
  const json& an = m["analyses"][0];
  CHECK(an["allele_frequencies"] == "estimated from the data");
  // Pedigree 1 of FASTLINK's example: 17 people, 3 founders: 2 * 14 - 3 = 25 bits.
  CHECK(an["pedigree_bits"][0]["bits"] == 25);
  CHECK(an["pedigree_bits"][0]["beyond_merlin"] == true);
  // The peak is the point of largest LOD.
  double best = -1e300;
  for (const auto& p : an["points"]) best = std::max(best, p["lod"].get<double>());
  CHECK(an["peak"]["lod"].get<double>() == best);
  CHECK(an["peak"].contains("hlod"));
  CHECK(an["peak"].contains("alpha"));
}

TEST_CASE("Merlin.LinkageReportHasHlodAndPeak", "[linkage][merlin][apps]") {
  const std::string p = merlin("fastlink/fastlink.linkage");
  const json l = run_json({"--dat", p + ".dat", "--ped", p + ".pre", "--positions", "0:10:5"});
  REQUIRE(l.contains("peak"));
  REQUIRE(l.contains("peak_hlod"));
  REQUIRE(l["pedigree_bits"].size() == 2);
  for (const auto& e : l["evaluations"]) {
    std::vector<double> lods;
    for (const auto& q : e["pedigrees"]) lods.push_back(q["lod"].get<double>());
    const auto h = kinfer::linkage::max_hlod(lods);
    CHECK(e["total"]["hlod"].get<double>() == Approx(h.hlod).margin(1e-12));
    CHECK(e["total"]["hlod"].get<double>() >= e["total"]["lod"].get<double>() - 1e-12);
  }
}

TEST_CASE("Merlin.PlotHasLodAndHlod", "[linkage][merlin][apps]") {
  // gnuplot is a dependency of the tests (scripts/install-deps.sh): missing, the test fails
  REQUIRE(std::system("command -v gnuplot >/dev/null 2>&1") == 0);
  TempDir t;
  auto a = merlin_args("loop", "loop");
  a.insert(a.end(), {"--steps", "1", "--out", (t / "res").string()});
  const ProcessResult r = lod(a);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string svg = read_text(t / "res" / "lod.svg");
  CHECK(svg.find("HLOD") != std::string::npos);
  CHECK(fs::exists(t / "res" / "lod.json"));
}

// ---------------------------------------------------------------------------------------------
// Bad files: every MERLIN file type, with the file, the line and the column.

namespace {

std::string bad(const std::string& f) { return (test_data_dir() / "bad" / "merlin" / f).string(); }

struct BadCase {
  const char* what;
  std::vector<const char*> files;  // dat, ped, map, freq, model
  const char *place, *column, *message;
};

}  // namespace

TEST_CASE("Merlin.BadFilesNameFileLineColumn", "[linkage][merlin][apps]") {
  const std::vector<const char*> good = {"good.dat", "good.ped", "good.map", "good.freq",
                                         "good.model"};
  const char* flags[] = {"-d", "-p", "-m", "-f", "--model"};
  auto run = [&](const std::vector<const char*>& files) {
    std::vector<std::string> a;
    for (int i = 0; i < 5; ++i) a.insert(a.end(), {flags[i], bad(files[i])});
    return lod(a);
  };
  const ProcessResult ok = run(good);
  INFO(ok.err);
  CHECK(ok.rc == 0);
  const BadCase cases[] = {
      {"dat", {"unknown_item.dat"}, "unknown_item.dat:3:", "column 1:", "item type"},
      {"ped: status",
       {nullptr, "bad_status.ped"},
       "bad_status.ped:3:",
       "column 6:",
       "affection status DISEASE"},
      {"ped: genotype",
       {nullptr, "half_genotype.ped"},
       "half_genotype.ped:3:",
       "column 8:",
       "marker m2"},
      {"ped: allele not in the frequencies",
       {nullptr, "allele_not_in_freq.ped"},
       "allele_not_in_freq.ped:3:",
       "column 8:",
       "allele '3' of marker m2"},
      {"map",
       {nullptr, nullptr, "bad_position.map"},
       "bad_position.map:3:",
       "column 3:",
       "position of m2"},
      {"freq",
       {nullptr, nullptr, nullptr, "bad_frequency.freq"},
       "bad_frequency.freq:4:",
       "column 3:",
       "allele frequency of m2"},
      {"model: penetrances",
       {nullptr, nullptr, nullptr, nullptr, "two_penetrances.model"},
       "two_penetrances.model:2:",
       "column 3:",
       "three penetrances"},
      {"model: unknown affection",
       {nullptr, nullptr, nullptr, nullptr, "unknown_trait.model"},
       "unknown_trait.model:2:",
       "column 1:",
       "'OTHER' is not an A item"},
  };
  for (const BadCase& c : cases) {
    std::vector<const char*> files = good;
    for (std::size_t i = 0; i < c.files.size(); ++i)
      if (c.files[i]) files[i] = c.files[i];
    const ProcessResult r = run(files);
    INFO(c.what << ": " << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err,
               Catch::Contains(c.place) && Catch::Contains(c.column) && Catch::Contains(c.message));
  }
}

// ---------------------------------------------------------------------------------------------
// HLOD: pure functions against closed forms.

TEST_CASE("Hlod.ClosedFormTwoFamilies", "[linkage][merlin]") {
  using kinfer::linkage::admixture_lod;
  using kinfer::linkage::max_hlod;
  // LODs a, b: d/dalpha [log(1 + alpha x) + log(1 + alpha y)] = 0 with x = 10^a - 1,
  // y = 10^b - 1 gives alpha = -(x + y) / (2 x y).
  for (auto [a, b] :
       {std::pair{1.0, -1.0}, std::pair{2.0, -0.5}, std::pair{0.7, -0.3}, std::pair{3.0, -2.0}}) {
    const double x = std::pow(10.0, a) - 1, y = std::pow(10.0, b) - 1;
    const double alpha = -(x + y) / (2 * x * y);
    REQUIRE(alpha > 0);
    REQUIRE(alpha < 1);
    const double hlod = std::log10((1 + alpha * x) * (1 + alpha * y));
    const auto h = max_hlod({a, b});
    INFO("LODs " << a << ", " << b);
    CHECK(h.alpha == Approx(alpha).margin(1e-8));
    CHECK(h.hlod == Approx(hlod).margin(1e-12));
    CHECK(admixture_lod({a, b}, alpha) == Approx(hlod).margin(1e-14));
  }
  // LODs 1 and -1: alpha = 1/2 exactly, HLOD = log10(5.5 * 0.55).
  const auto h = max_hlod({1.0, -1.0});
  CHECK(h.alpha == Approx(0.5).margin(1e-9));
  CHECK(h.hlod == Approx(std::log10(3.025)).margin(1e-12));
  // A family that excludes linkage (LOD -inf) and one at 2: alpha = 49/99,
  // HLOD = log10(1 + 99 * 49/99) + log10(1 - 49/99) = log10(2500 / 99).
  const auto g = max_hlod({2.0, -INFINITY});
  CHECK(g.alpha == Approx(49.0 / 99).margin(1e-8));
  CHECK(g.hlod == Approx(std::log10(2500.0 / 99)).margin(1e-12));
}

TEST_CASE("Hlod.AlphaOneIsTheLodAndNoLinkageIsZero", "[linkage][merlin]") {
  using kinfer::linkage::admixture_lod;
  using kinfer::linkage::max_hlod;
  const std::vector<double> lods{0.8, -0.4, 1.3, -2.1};
  CHECK(admixture_lod(lods, 1.0) == Approx(0.8 - 0.4 + 1.3 - 2.1).margin(1e-14));
  CHECK(admixture_lod(lods, 0.0) == 0.0);
  // All LODs positive: the sum increases in alpha up to 1, HLOD = LOD.
  const auto up = max_hlod({0.5, 1.5, 0.01});
  CHECK(up.alpha == Approx(1.0).margin(1e-9));
  CHECK(up.hlod == Approx(2.01).margin(1e-12));
  // All LODs <= 0: HLOD 0 at alpha 0.
  const auto none = max_hlod({-0.5, 0.0, -3.0, -INFINITY});
  CHECK(none.hlod == 0.0);
  CHECK(none.alpha == 0.0);
  CHECK(max_hlod({}).hlod == 0.0);
  // Large LODs do not overflow.
  const auto big = max_hlod({400.0, -1.0});
  CHECK(std::isfinite(big.hlod));
  CHECK(big.hlod > 399);
}

TEST_CASE("Hlod.BitsAreTwoNonFoundersMinusFounders", "[linkage][merlin]") {
  kinfer::linkage::Pedigree p;
  p.people.resize(5);
  p.people[2].father = 0, p.people[2].mother = 1;
  p.people[3].father = 0, p.people[3].mother = 1;
  p.people[4].father = 2, p.people[4].mother = 1;
  CHECK(kinfer::linkage::lander_green_bits(p) == 2 * 3 - 2);
}

// ---------------------------------------------------------------------------------------------
// Readers.

TEST_CASE("Merlin.FrequenciesCountedFromData", "[linkage][merlin]") {
  using namespace kinfer::io;
  const MerlinData dat = parse_merlin_dat("t.dat", "A D\nT q\nM m1\nS2\nM mx\nE\nM ignored\n");
  REQUIRE(dat.items.size() == 5);
  CHECK(dat.items[3].columns == 2);
  // m1: 1/2, 2 2, 0/0, A/C (= 1/2), 2/3, x x  -> allele 1: 2, 2: 4, 3: 1 of 8... counted by
  // hand below. mx (X): males count one allele.
  const std::string ped =
      "f a 0 0 1 2 1.1 1/2 s s 1/1\n"
      "f b 0 0 2 1 x   2 2 s s 1 2\n"
      "f c a b 1 0 2.0 0/0 s s 2/2\n"
      "f d a b 2 x 3   A/C s s 2/2\n"
      "f e a b 2 1 x   2/3 s s x x\n"
      "f g a b 1 1 x   x x s s 0/0\n";
  const MerlinPedigree p = parse_merlin_ped("t.ped", ped, dat);
  REQUIRE(p.people.size() == 6);
  CHECK(p.people[0].status[0] == 2);
  CHECK(p.people[2].status[0] == 0);
  CHECK(p.people[3].status[0] == 0);
  const auto f = estimate_frequencies(dat, p, {"mx"});
  // m1 alleles: a 1,2; b 2,2; d 1,2; e 2,3 -> 1: 2, 2: 5, 3: 1 (8 alleles).
  const MerlinAlleles& m1 = f.at("m1");
  REQUIRE(m1.labels == std::vector<std::string>{"1", "2", "3"});
  CHECK(m1.freq[0] == Approx(2.0 / 8));
  CHECK(m1.freq[1] == Approx(5.0 / 8));
  CHECK(m1.freq[2] == Approx(1.0 / 8));
  // mx: a (male) 1; b 1,2; c (male) 2; d 2,2 -> 1: 2, 2: 4 (6 alleles).
  const MerlinAlleles& mx = f.at("mx");
  REQUIRE(mx.labels == std::vector<std::string>{"1", "2"});
  CHECK(mx.freq[0] == Approx(2.0 / 6));
  CHECK(mx.freq[1] == Approx(4.0 / 6));
}

TEST_CASE("Merlin.AnalysisInputIsTheLinkageModel", "[linkage][merlin]") {
  using namespace kinfer::io;
  MerlinFiles f;
  f.dat = parse_merlin_dat("t.dat", "M m2\nA D\nM m1\n");
  f.ped = parse_merlin_ped("t.ped",
                           "f 1 0 0 1 1/2 1 1 1\n\n"
                           "f 2 0 0 2 2 2 1 2/1\n"
                           "f 3 1 2 1 1/1 2 1/2\n",
                           f.dat);
  f.map = parse_merlin_map("t.map", "1 m1 12.5\n1 m2 2.5\n2 other 0\n");
  f.freq = parse_merlin_freq("t.freq", "M m1\nF 0.4 0.6\nM m2\nA 2 0.7\nA 1 0.3\n");
  f.have_freq = true;
  const auto models = parse_merlin_model("t.model", "D 0.05 0.01 0.5 0.9 ADD\n");
  CHECK(models[0].label == "ADD");
  CHECK(merlin_chromosomes(f) == std::vector<std::string>{"1"});
  const MerlinAnalysisInput in = merlin_analysis_input(f, models[0], "t.model", "1");
  const auto& lf = in.loci;
  REQUIRE(lf.n_loci() == 3);
  CHECK(lf.loci[0].name == "D");
  CHECK(lf.loci[0].freq == std::vector<double>{0.95, 0.05});
  CHECK(lf.loci[0].penetrance[0] == std::vector<double>{0.01, 0.5, 0.9});
  CHECK(lf.loci[1].name == "m2");  // map order: m2 at 2.5 cM, then m1 at 12.5 cM
  CHECK(lf.loci[1].freq == std::vector<double>{0.7, 0.3});  // labels 2, 1 as listed
  CHECK(lf.male_theta[1] == Approx(0.5 * (1 - std::exp(-0.2))).epsilon(1e-14));  // Haldane
  REQUIRE(in.peds.pedigrees.size() == 1);
  const auto& people = in.peds.pedigrees[0].people;
  REQUIRE(people.size() == 3);
  CHECK(people[2].father == 0);
  CHECK(people[2].mother == 1);
  // Person 2: m2 '2 2' (label 2 = allele 1 of the A list); m1 '2/1'.
  CHECK(people[1].pheno[1].a1 == 1);
  CHECK(people[1].pheno[1].a2 == 1);
  CHECK(people[1].pheno[2].a1 == 2);
  CHECK(people[1].pheno[2].a2 == 1);
  CHECK(people[1].pheno[0].a1 == 1);  // unaffected
  CHECK(people[1].line == 3);         // the .ped's own line numbers
}

TEST_CASE("Merlin.OneAnalysisPerModelAndChromosome", "[linkage][merlin][apps]") {
  TempDir t;
  write_text(t / "two.map",
             "CHR MARKER CM\n1 rs1 10\n2 rs2 20.000045990597\n2 rs3 30.000091981195\n");
  write_text(t / "two.model", "TRAIT 0.0001 0,0,1 REC\nTRAIT 0.01 0.001,0.9,0.9 DOM\n");
  std::vector<std::string> a = {
      "-d",      merlin("loop/loop.dat"),    "-p",    merlin("loop/loop.ped"),
      "-m",      (t / "two.map").string(),   "-f",    merlin("loop/loop.freq"),
      "--model", (t / "two.model").string(), "--out", (t / "res").string()};
  const ProcessResult r = lod(a);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(lines_with(r.out, "kinfer lod: MERLIN input").size() == 4);
  CHECK_THAT(r.out, Catch::Contains("PEAKS") && Catch::Contains("model DOM, chromosome 2"));
  const json m = json::parse(read_text(t / "res" / "lod.json"));
  REQUIRE(m["analyses"].size() == 4);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"REC", "1"}, {"REC", "2"}, {"DOM", "1"}, {"DOM", "2"}};
  for (std::size_t i = 0; i < 4; ++i) {
    const json& an = m["analyses"][i];
    CHECK(an["model"]["label"] == want[i].first);
    CHECK(an["chromosome"] == want[i].second);
    CHECK(an["markers"].size() == (want[i].second == "1" ? 1u : 2u));
    CHECK(an["points"].size() == an["markers"].size());  // default: at the markers
  }
  CHECK(m["analyses"][2]["model"]["penetrances"][1] == 0.9);
  REQUIRE(std::system("command -v gnuplot >/dev/null 2>&1") == 0);  // a test dependency
  CHECK(fs::exists(t / "res" / "lod-REC-chr1.svg"));
  CHECK(fs::exists(t / "res" / "lod-DOM-chr2.svg"));
}

// A Mendelian error in MERLIN files names the alleles as the file wrote them (152/154), not
// the numbers they are recoded to; and a LINKAGE --dat/--ped swap is named as such.
TEST_CASE("Merlin.MendelianErrorNamesAllelesAsWritten", "[linkage][merlin][apps]") {
  TempDir t;
  write_text(t / "e.dat", "A DISEASE\nM m1\n");
  // the child 154/156 cannot come from parents 152/152 and 152/158
  write_text(t / "e.ped",
             "f 1 0 0 1 1 152/152\nf 2 0 0 2 2 152/158\nf 3 1 2 1 2 154/156\n");
  write_text(t / "e.map", "1 m1 0.0\n");
  write_text(t / "e.model", "DISEASE 0.01 0.001,0.9,0.9 DOMINANT\n");
  const ProcessResult r = lod({"-d", (t / "e.dat").string(), "-p", (t / "e.ped").string(), "-m",
                               (t / "e.map").string(), "--model", (t / "e.model").string(),
                               "--singlepoint"});
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("Mendelian") && Catch::Contains("152/152") &&
                        Catch::Contains("154/156"));
}

TEST_CASE("Linkage.SwappedDatAndPedAreNamed", "[linkage][apps]") {
  const auto ex = linkage_data_dir() / "fastlink_example";
  const std::string ped = (ex / "pedfile.dat").string(), dat = (ex / "datafile.dat").string();
  SECTION("a pedigree file given as the locus file") {
    const ProcessResult r = lod({"--dat", ped, "--ped", dat});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains(ped) && Catch::Contains("looks like a pedigree file"));
  }
  SECTION("a locus file given as the pedigree file") {
    const ProcessResult r = lod({"--dat", dat, "--ped", dat});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("looks like a locus (data) file"));
  }
}
