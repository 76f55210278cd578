// [io] LINKAGE locus and pedigree files: what is read, and the errors for what is wrong.
#include <catch2/catch.hpp>

#include "engine/errors.hpp"
#include "io/linkage.hpp"
#include "test_linkage_support.hpp"

using namespace kinfer;
using namespace kinfer::linkage_test;

namespace {

// The message of the InputError `f` throws (fails the test if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

const char* kTwoMarkers = R"(2 0 0 5 << NO. OF LOCI, RISK LOCUS, SEXLINKED, PROGRAM
0 0.0 0.0 0 << MUT LOCUS, MUT RATE, HAPLOTYPE FREQUENCIES
1 2
3 3 << ALLELE NUMBERS, NO. OF ALLELES # m1
0.2 0.3 0.5
3 2 # m2
0.4 0.6
0 0 << SEX DIFFERENCE, INTERFERENCE
0.1 << RECOMBINATION VALUES
1 0.1 0.4
)";

LocusFile two_markers() { return io::parse_locus_file("two.dat", kTwoMarkers); }

}  // namespace

TEST_CASE("LinkageIo.DebianExample", "[io]") {
  const auto dir = linkage_data_dir() / "fastlink_example";
  const LocusFile lf = io::read_locus_file((dir / "datafile.dat").string());
  REQUIRE(lf.n_loci() == 3);
  CHECK(lf.map_order == std::vector<int>{0, 2, 1});
  CHECK(lf.loci[0].name == "p105-599Ha/TaqI");
  CHECK(lf.loci[1].name == "Schizophrenia");
  CHECK(lf.loci[1].type == LocusType::Affection);
  REQUIRE(lf.loci[1].n_classes() == 3);
  CHECK(lf.loci[1].penetrance[0] == std::vector<double>{1.0, 0.14, 0.0});
  CHECK(lf.loci[2].freq == std::vector<double>{0.33, 0.67});
  CHECK(lf.male_theta == std::vector<double>{0.1197, 0.125});
  CHECK(lf.female_theta == lf.male_theta);
  REQUIRE(lf.tail.present);
  CHECK(lf.tail.values == std::vector<double>{2, 0.125, 0.38});
  CHECK(program_from_tail(lf) == Program::Mlink);

  const PedigreeFile pf = io::read_pedigree_file((dir / "pedfile.dat").string(), lf);
  CHECK(pf.post_makeped);
  REQUIRE(pf.pedigrees.size() == 2);
  CHECK(pf.pedigrees[0].people.size() == 17);
  CHECK(pf.pedigrees[1].people.size() == 14);
  const Person& p14 = pf.pedigrees[0].people[13];  // "1 14 11 10 ...": trailing text ignored
  CHECK(p14.id == "14");
  CHECK(pf.pedigrees[0].people[p14.father].id == "11");
  CHECK(pf.pedigrees[0].people[p14.mother].id == "10");
  CHECK(p14.pheno[0].a1 == 1);
  CHECK(p14.pheno[0].a2 == 3);
  CHECK(p14.pheno[1].a1 == 2);  // affected
  CHECK(p14.pheno[1].a2 == 1);  // liability class 1
  CHECK_FALSE(pf.pedigrees[0].has_loop);
}

TEST_CASE("LinkageIo.PreAndPostMakeped", "[io]") {
  const LocusFile lf = two_markers();
  // Pre-makeped: 5 + 4 columns; names as ids.
  const PedigreeFile pre = io::parse_pedigree_file("pre.ped",
                                                   "fam dad 0 0 1 1 2 1 1\n"
                                                   "fam mum 0 0 2 3 3 2 2\n"
                                                   "fam kid dad mum 2 1 3 1 2\n",
                                                   lf);
  CHECK_FALSE(pre.post_makeped);
  REQUIRE(pre.pedigrees.size() == 1);
  CHECK(pre.pedigrees[0].people[2].father == 0);
  CHECK(pre.pedigrees[0].people[2].pheno[0].a2 == 3);
  // Post-makeped: 9 + 4 columns, and extra trailing columns are ignored.
  const PedigreeFile post = io::parse_pedigree_file("post.ped",
                                                    "1 1 0 0 3 0 0 1 1 1 2 1 1 x\n"
                                                    "1 2 0 0 3 0 0 2 0 3 3 2 2 y\n"
                                                    "1 3 1 2 0 0 0 2 0 1 3 1 2 z\n",
                                                    lf);
  CHECK(post.post_makeped);
  CHECK(post.pedigrees[0].people[2].mother == 1);
  CHECK(post.pedigrees[0].people[2].pheno[1].a2 == 2);
}

TEST_CASE("LinkageIo.LoopBreakerCopiesMerge", "[io]") {
  const auto dir = linkage_data_dir();
  const LocusFile lf = io::read_locus_file((dir / "swiftlink/loop.dat").string());
  const PedigreeFile pre = io::read_pedigree_file((dir / "swiftlink/loop.ped").string(), lf);
  const PedigreeFile post =
      io::read_pedigree_file((dir / "variants/loop_breaker.ped").string(), lf);
  CHECK_FALSE(pre.post_makeped);
  CHECK(post.post_makeped);
  CHECK(post.merged_loop_breakers == 1);
  REQUIRE(post.pedigrees[0].people.size() == 9);
  const auto& ps = post.pedigrees[0].people;
  CHECK(ps[ps[8].mother].id == "8");  // the copy (10) was the mother of 9
  CHECK(pre.pedigrees[0].has_loop);
  CHECK(post.pedigrees[0].has_loop);
}

TEST_CASE("LinkageIo.SuperlinkFirstLineAndWrappedLists", "[io]") {
  std::string text = kTwoMarkers;
  text.replace(0, text.find('\n'), "2 0 0 5 0");
  text.replace(text.find("0.2 0.3 0.5"), 11, "0.2 0.3\n0.5");
  const LocusFile lf = io::parse_locus_file("superlink.dat", text);
  CHECK(lf.loci[0].freq == std::vector<double>{0.2, 0.3, 0.5});
  CHECK(lf.loci[0].name == "m1");
}

TEST_CASE("LinkageIo.SexDifferenceAndMapFunction", "[io]") {
  std::string t = kTwoMarkers;
  t.replace(t.find("0 0 << SEX"), 3, "2 2");
  t.replace(t.find("0.1 << RECOMB"), 3, "0.05\n0.3");
  const LocusFile lf = io::parse_locus_file("sex.dat", t);
  CHECK(lf.male_theta == std::vector<double>{0.05});  // first line male
  CHECK(lf.female_theta == std::vector<double>{0.3});
  CHECK(lf.map_function == MapFunction::Kosambi);
  std::string r = kTwoMarkers;
  r.replace(r.find("0 0 << SEX"), 3, "1 0");
  r.replace(r.find("0.1 << RECOMB"), 3, "0.05\n2.0");
  const LocusFile lr = io::parse_locus_file("ratio.dat", r);
  CHECK(lr.female_theta[0] == Approx(0.0950).margin(5e-5));  // FASTLINK prints 0.095
}

TEST_CASE("LinkageIo.LocusFileErrors", "[io]") {
  auto with = [](std::string from, std::string to) {
    std::string t = kTwoMarkers;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  std::string m = error_of([&] { io::parse_locus_file("f.dat", with("0.4 0.6", "0.4 0.5")); });
  CHECK_THAT(m, Catch::Contains("f.dat:7:") && Catch::Contains("column 1") &&
                    Catch::Contains("sum to 0.9"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("3 2 # m2", "0 2 # m2")); });
  CHECK_THAT(m, Catch::Contains("f.dat:6:") && Catch::Contains("quantitative") &&
                    Catch::Contains("expected 1 (affection) or 3"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("3 2 # m2", "2 2 # m2")); });
  CHECK_THAT(m, Catch::Contains("binary factors"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("1 2\n3 3", "1 1\n3 3")); });
  CHECK_THAT(m, Catch::Contains("f.dat:3:") && Catch::Contains("appears twice in the map order"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("0.2 0.3 0.5", "0.2 0.3 zero")); });
  CHECK_THAT(
      m, Catch::Contains("f.dat:5:") && Catch::Contains("column 3") && Catch::Contains("'zero'"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("0.1 << RECOMB", "0.7 << RECOMB")); });
  CHECK_THAT(m, Catch::Contains("f.dat:9:") && Catch::Contains("between 0 and 0.5"));
  m = error_of([&] { io::parse_locus_file("f.dat", with("0 0 << SEX", "0 1 << SEX")); });
  CHECK_THAT(m, Catch::Contains("interference 1"));
}

TEST_CASE("LinkageIo.PedigreeErrors", "[io]") {
  const LocusFile lf = two_markers();
  auto err = [&](const std::string& text) {
    return error_of([&] { io::parse_pedigree_file("p.ped", text, lf); });
  };
  const std::string a = "1 1 0 0 1 1 2 1 1\n", b = "1 2 0 0 2 3 3 2 2\n";
  // An unknown parent.
  std::string m = err(a + b + "1 3 1 7 2 1 3 1 2\n");
  CHECK_THAT(m, Catch::Contains("p.ped:3:") && Catch::Contains("column 4") &&
                    Catch::Contains("7") && Catch::Contains("not an individual of this pedigree"));
  // Sex inconsistent with parenthood: the father is female.
  m = err(a + b + "1 3 2 1 2 1 3 1 2\n");
  CHECK_THAT(m, Catch::Contains("p.ped:3:") && Catch::Contains("column 3") &&
                    Catch::Contains("is the father of 3 but has sex 2 (female)"));
  // Own ancestor.
  m = err("1 1 3 2 1 1 2 1 1\n" + b + "1 3 1 2 1 1 3 1 2\n");
  CHECK_THAT(m, Catch::Contains("their own ancestor"));
  // An allele number outside the locus (m2 has 2 alleles).
  m = err(a + b + "1 3 1 2 2 1 3 1 3\n");
  CHECK_THAT(m, Catch::Contains("p.ped:3:") && Catch::Contains("column 9") &&
                    Catch::Contains("1 to 2, or 0 for untyped, found '3'"));
  // Too few columns.
  m = err(a + b + "1 3 1 2 2 1 3 1\n");
  CHECK_THAT(m, Catch::Contains("p.ped:3:") && Catch::Contains("expected 9 columns") &&
                    Catch::Contains("or 13 (post-makeped), found 8"));
  // One parent only, a duplicate id, a half-typed genotype.
  CHECK_THAT(err(a + b + "1 3 1 0 2 1 3 1 2\n"), Catch::Contains("has a father but no mother"));
  CHECK_THAT(err(a + b + "1 2 1 0 2 1 3 1 2\n"), Catch::Contains("appears twice"));
  CHECK_THAT(err(a + b + "1 3 1 2 2 1 0 1 2\n"), Catch::Contains("half-typed"));
}

TEST_CASE("LinkageIo.SexLinkedMales", "[io]") {
  std::string t = kTwoMarkers;
  t.replace(0, 7, "2 0 1 5");
  const LocusFile lf = io::parse_locus_file("x.dat", t);
  CHECK(lf.sex_linked);
  const PedigreeFile pf =
      io::parse_pedigree_file("x.ped", "1 1 0 0 1 2 0 1 1\n1 2 0 0 2 1 3 1 2\n", lf);
  CHECK(pf.pedigrees[0].people[0].pheno[0].a1 == 2);
  const std::string m =
      error_of([&] { io::parse_pedigree_file("x.ped", "1 1 0 0 1 2 3 1 1\n", lf); });
  CHECK_THAT(m, Catch::Contains("x.ped:1:") && Catch::Contains("one X chromosome"));
}

TEST_CASE("LinkageIo.SexLinkedAffectionWithoutMaleLines", "[io]") {
  // SwiftLink's X-linked example leaves out the male penetrance lines: they are taken from the
  // homozygous female penetrances, with a warning.
  const LocusFile lf = io::read_locus_file((linkage_data_dir() / "swiftlink/xlinked.dat").string());
  REQUIRE(lf.n_loci() == 11);
  CHECK(lf.loci[0].male_penetrance == std::vector<std::vector<double>>{{0.0, 1.0}});
  CHECK_FALSE(lf.warnings.empty());
}

TEST_CASE("LinkageIo.PostMakepedRoundTrip", "[io]") {
  const auto dir = linkage_data_dir();
  const LocusFile lf = io::read_locus_file((dir / "variants/xlinked5.dat").string());
  const PedigreeFile pre = io::read_pedigree_file((dir / "variants/xlinked5.pre").string(), lf);
  const std::string text = io::format_post_makeped(pre, lf);
  const PedigreeFile post = io::parse_pedigree_file("round.ped", text, lf);
  CHECK(post.post_makeped);
  REQUIRE(post.pedigrees[0].people.size() == pre.pedigrees[0].people.size());
  for (std::size_t i = 0; i < pre.pedigrees[0].people.size(); ++i) {
    const Person& a = pre.pedigrees[0].people[i];
    const Person& b = post.pedigrees[0].people[i];
    CHECK(a.father == b.father);
    CHECK(a.mother == b.mother);
    CHECK(a.sex == b.sex);
    for (int k = 0; k < lf.n_loci(); ++k) CHECK(a.pheno[k].a1 == b.pheno[k].a1);
  }
}

TEST_CASE("LinkageIo.UnrelatedPartsAreWarned", "[io]") {
  const LocusFile lf = two_markers();
  const PedigreeFile pf = io::parse_pedigree_file("parts.ped",
                                                  "1 1 0 0 1 1 2 1 1\n"
                                                  "1 2 0 0 2 3 3 2 2\n"
                                                  "1 3 1 2 2 1 3 1 2\n"
                                                  "1 4 0 0 2 1 1 1 1\n",
                                                  lf);
  REQUIRE(pf.warnings.size() == 1);
  CHECK_THAT(pf.warnings[0],
             Catch::Contains("pedigree 1 has 2 unrelated parts") && Catch::Contains("(4)"));
}
