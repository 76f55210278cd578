// The command line end to end: malformed input gives exit 2 and one error naming the file, the
// line and what was expected; legal corner cases give the closed-form answer; the output formats
// (--json, --uai-output) and exit codes are what the README promises.
#include <zlib.h>

#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support.hpp"

using namespace kinfer::test;

namespace {

// The single error line of a failed run (Catch reports the whole stderr when it is not single).
std::string single_error(const ProcessResult& r) {
  const auto errors = lines_with(r.err, "[error]");
  INFO("stderr:\n" << r.err);
  REQUIRE(errors.size() == 1);
  return errors[0];
}

// log10 P(e) as printed by `kinfer pe` in text mode.
double printed_log10(const ProcessResult& r) {
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  const std::string key = "log10 P(e) = ";
  const auto at = r.out.find(key);
  REQUIRE(at != std::string::npos);
  const std::string value = r.out.substr(at + key.size(), r.out.find('\n', at) - at - key.size());
  if (value == "-inf") return -INFINITY;
  return std::stod(value);
}

// The text output prints 10 significant digits.
Approx Printed(double x) { return Approx(x).epsilon(1e-9).margin(1e-12); }

void write_gzip(const fs::path& p, const std::string& text) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) ==
          static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// A two-variable network whose tables do not sum to one:
//   P = sum_{a,b} f0(a) f1(a,b) with f0 = (0.5, 0.5), f1 = (1 2; 3 4)  ->  5,
// and with evidence b = 1: 0.5*2 + 0.5*4 = 3.
const fs::path kGood = "bad/good.uai";

struct BadCase {
  std::string file;    // under tests/data/bad
  long line;           // the line the message must name (0: the whole file, no line)
  std::string expect;  // what the message must say
};

}  // namespace

TEST_CASE("Parser.BadNetworkIsAnInputError", "[io][apps]") {
  // Each file is a small variation of good.uai; `cat -n tests/data/bad/FILE` shows the line.
  const std::vector<BadCase> cases = {
      {"empty.uai", 0, "file is empty, expected a UAI network (MARKOV or BAYES)"},
      {"blank.uai", 0, "file is empty, expected a UAI network (MARKOV or BAYES)"},
      {"unknown_type.uai", 1, "expected the network type MARKOV or BAYES, found 'FACTORGRAPH'"},
      {"nvars_not_integer.uai", 2, "expected the number of variables (an integer), found 'two'"},
      {"card_not_integer.uai", 3, "cardinality of variable 1 of 2 (an integer), found '2.5'"},
      {"card_zero.uai", 3, "cardinality of variable 1 of 2 between 1 and"},
      {"factors_negative.uai", 4, "expected the number of factors between 0 and"},
      {"scope_range.uai", 6, "variable 2 of 2 in the scope of factor 1 between 0 and 1, found 2"},
      {"scope_repeat.uai", 6, "variable 1 appears twice in the scope of factor 1"},
      // A scope with fewer variables than declared reads on into the next number.
      {"scope_short.uai", 8, "variable 2 of 2 in the scope of factor 1 between 0 and 1, found 2"},
      // ... and one with more swallows the next scope's size, so the tables no longer match.
      {"scope_count.uai", 9, "factor 1 declares 4 table entries, expected 2"},
      {"factor_count.uai", 8, "variable 1 of 2 in the scope of factor 2 (an integer), found '0.5'"},
      {"entry_count.uai", 9, "factor 1 declares 3 table entries, expected 4"},
      {"extra_entry.uai", 8, "number of table entries of factor 1 (4) (an integer), found '0.5'"},
      {"truncated.uai", 10, "unexpected end of file, expected table entry 3 of 4 of factor 1"},
      {"not_a_number.uai", 10, "expected table entry 4 of 4 of factor 1 (a number), found '4x'"},
      {"negative.uai", 10,
       "table entry 2 of factor 1 is -2, expected a finite non-negative number"},
      {"nan.uai", 8, "table entry 2 of factor 0 is nan, expected a finite non-negative number"},
      {"inf.uai", 10, "table entry 3 of factor 1 is inf, expected a finite non-negative number"},
      {"trailing.uai", 11, "unexpected content after the last table (2 factors were declared)"},
      {"trailing_word.uai", 10, "unexpected content after the last table"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.file) {
      const std::string path = (test_data_dir() / "bad" / c.file).string();
      const ProcessResult r = run_kinfer({"pe", path});
      INFO("stderr:\n" << r.err);
      CHECK(r.rc == 2);
      CHECK(r.out.empty());
      const std::string e = single_error(r);
      const std::string where =
          c.line > 0 ? path + ":" + std::to_string(c.line) + ": " : path + ": ";
      CHECK_THAT(e, Catch::Contains(where));
      CHECK_THAT(e, Catch::Contains(c.expect));
    }
  }
}

TEST_CASE("Parser.BadEvidenceIsAnInputError", "[io][apps]") {
  const std::vector<BadCase> cases = {
      {"evid_var_range.evid", 1,
       "evidence variable 2 does not exist, expected an index from 0 to 1"},
      {"evid_value_range.evid", 1, "evidence value 2 for variable 1 is outside its domain 0..1"},
      {"evid_conflict.evid", 1, "conflicting evidence: variable 1 is set to 0 (line 1) and to 1"},
      {"evid_pair_count.evid", 1,
       "expected 2 (variable, value) pairs after the count 2 on line 1, found 3 integers"},
      {"evid_pair_count_old.evid", 2,
       "expected 2 (variable, value) pairs after the count 2 on line 2, found 3 integers"},
      {"evid_samples.evid", 1, "the file holds 2 evidence samples, expected exactly 1"},
      {"evid_not_integer.evid", 1, "(an integer), found 'x'"},
      {"evid_negative_count.evid", 1, "number of observed variables (at least 0), found -1"},
  };
  const std::string net = (test_data_dir() / kGood).string();
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.file) {
      const std::string path = (test_data_dir() / "bad" / c.file).string();
      const ProcessResult r = run_kinfer({"pe", net, "-e", path});
      INFO("stderr:\n" << r.err);
      CHECK(r.rc == 2);
      CHECK(r.out.empty());
      const std::string e = single_error(r);
      CHECK_THAT(e, Catch::Contains(path + ":" + std::to_string(c.line) + ": "));
      CHECK_THAT(e, Catch::Contains(c.expect));
    }
  }
}

TEST_CASE("Parser.UnreadableFilesAreInputErrors", "[io][apps]") {
  TempDir tmp;
  SECTION("missing network") {
    const std::string path = (tmp / "missing.uai").string();
    const ProcessResult r = run_kinfer({"pe", path});
    CHECK(r.rc == 2);
    CHECK_THAT(single_error(r), Catch::Contains(path + ": cannot open"));
  }
  SECTION("missing evidence") {
    const std::string path = (tmp / "missing.evid").string();
    const ProcessResult r = run_kinfer({"pe", (test_data_dir() / kGood).string(), "-e", path});
    CHECK(r.rc == 2);
    CHECK_THAT(single_error(r), Catch::Contains(path + ": cannot open"));
  }
  SECTION("a folder") {
    const ProcessResult r = run_kinfer({"pe", tmp.path().string()});
    CHECK(r.rc == 2);
    CHECK_THAT(single_error(r), Catch::Contains(tmp.path().string() + ": cannot read"));
  }
  SECTION("truncated gzip") {
    // A compressed file cut short: the gzip stream ends before its trailer.
    const fs::path gz = tmp / "cut.uai.gz";
    write_gzip(gz, read_text(test_data_dir() / kGood) + std::string(4000, ' ') + "\n");
    const std::string bytes = read_text(gz);
    write_text(gz, bytes.substr(0, bytes.size() - 10));
    const ProcessResult r = run_kinfer({"pe", gz.string()});
    CHECK(r.rc == 2);
    CHECK_THAT(single_error(r),
               Catch::Contains(gz.string() + ": cannot read (corrupt or truncated gzip"));
  }
}

TEST_CASE("Pe.TablesNeedNotSumToOne", "[io][apps]") {
  const ProcessResult r = run_kinfer({"pe", (test_data_dir() / kGood).string()});
  REQUIRE(r.rc == 0);
  CHECK(printed_log10(r) == Printed(std::log10(5.0)));
}

TEST_CASE("Pe.CardinalityOneVariables", "[io][apps]") {
  // Variables 0 and 2 have one value; the answer is brute-forced below from the same tables.
  const std::vector<int> card = {1, 3, 1, 2};
  const std::vector<double> f0 = {2.0, 0.0, 1.5};                  // (0, 1)
  const std::vector<double> f1 = {0.25, 4.0, 1.0, 0.0, 3.0, 0.5};  // (1, 2, 3)
  const std::vector<double> f2 = {7.0};                            // (2)
  TempDir tmp;
  write_text(tmp / "c1.uai",
             "MARKOV\n4\n1 3 1 2\n3\n2 0 1\n3 1 2 3\n1 2\n"
             "3\n2 0 1.5\n6\n0.25 4 1 0 3 0.5\n1\n7\n");
  long double z = 0;
  for (int b = 0; b < card[1]; ++b)
    for (int d = 0; d < card[3]; ++d) z += (long double)f0[b] * f1[b * 2 + d] * f2[0];
  const ProcessResult r = run_kinfer({"pe", (tmp / "c1.uai").string()});
  REQUIRE(r.rc == 0);
  CHECK(printed_log10(r) == Printed(std::log10(static_cast<double>(z))));
}

TEST_CASE("Pe.BayesAndMarkovAgree", "[io][apps]") {
  // The type only names the semantics; both compute the product of the tables.
  TempDir tmp;
  std::string text = read_text(test_data_dir() / kGood);
  write_text(tmp / "bayes.uai", "BAYES" + text.substr(text.find('\n')));
  const ProcessResult r = run_kinfer({"pe", (tmp / "bayes.uai").string()});
  REQUIRE(r.rc == 0);
  CHECK(printed_log10(r) == Printed(std::log10(5.0)));
}

TEST_CASE("Pe.GzipNetworkAndEvidence", "[io][apps]") {
  TempDir tmp;
  write_gzip(tmp / "net.uai.gz", read_text(test_data_dir() / kGood));
  SECTION("no evidence") {
    const ProcessResult r = run_kinfer({"pe", (tmp / "net.uai.gz").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(5.0)));
  }
  SECTION("compressed evidence given with -e") {
    write_gzip(tmp / "e.evid.gz", "1 1 1\n");
    const ProcessResult r =
        run_kinfer({"pe", (tmp / "net.uai.gz").string(), "-e", (tmp / "e.evid.gz").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(3.0)));
  }
  SECTION("NET.uai.evid beside NET.uai.gz is picked up") {
    write_text(tmp / "net.uai.evid", "1 1 1\n");
    const ProcessResult r = run_kinfer({"pe", (tmp / "net.uai.gz").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(3.0)));
    CHECK_THAT(r.err, Catch::Contains((tmp / "net.uai.evid").string()));
  }
}

TEST_CASE("Pe.EvidenceForms", "[io][apps]") {
  TempDir tmp;
  const std::string net = (test_data_dir() / kGood).string();
  auto run_with = [&](const std::string& text) {
    write_text(tmp / "e.evid", text);
    return run_kinfer({"pe", net, "-e", (tmp / "e.evid").string()});
  };
  // (form, evidence text, P(e)): b = 1 gives 3, a = 0 and b = 1 gives 0.5 * 2 = 1.
  const std::vector<std::tuple<std::string, std::string, double>> cases = {
      {"UAI 2014 one line", "1 1 1\n", 3.0},
      {"UAI 2014 two pairs", "2 0 0 1 1", 1.0},
      {"older form with a sample count", "1\n1 1 1\n", 3.0},
      {"older form, two pairs", "1\n2 0 0 1 1\n", 1.0},
      {"repeated identical pair", "2 1 1 1 1\n", 3.0},
      {"no observation", "0\n", 5.0},
  };
  for (const auto& [name, text, p] : cases) {
    DYNAMIC_SECTION(name) {
      const ProcessResult r = run_with(text);
      REQUIRE(r.rc == 0);
      CHECK(printed_log10(r) == Printed(std::log10(p)));
    }
  }
}

TEST_CASE("Pe.EmptyEvidenceFileIsAnInputError", "[io][apps]") {
  TempDir tmp;
  const std::string net = (test_data_dir() / kGood).string();
  for (const std::string text : {"", "  \n\n"}) {
    write_text(tmp / "e.evid", text);
    const ProcessResult r = run_kinfer({"pe", net, "-e", (tmp / "e.evid").string()});
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK_THAT(single_error(r), Catch::Contains("e.evid") && Catch::Contains("is empty"));
  }
  SECTION("0 is no evidence, and the log says so") {
    write_text(tmp / "e.evid", "0\n");
    const ProcessResult r = run_kinfer({"pe", net, "-e", (tmp / "e.evid").string()});
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.err, Catch::Contains("computing with no evidence"));
  }
}

TEST_CASE("Pe.EvidenceBesideTheNetwork", "[io][apps]") {
  TempDir tmp;
  write_text(tmp / "net.uai", read_text(test_data_dir() / kGood));
  SECTION("absent: no evidence, and the log says so") {
    const ProcessResult r = run_kinfer({"pe", (tmp / "net.uai").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(5.0)));
    CHECK_THAT(r.err, Catch::Contains("no evidence"));
  }
  SECTION("NET.evid is used when -e is absent") {
    write_text(tmp / "net.uai.evid", "1 1 1\n");
    const ProcessResult r = run_kinfer({"pe", (tmp / "net.uai").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(3.0)));
    CHECK_THAT(r.err, Catch::Contains((tmp / "net.uai.evid").string()));
  }
  SECTION("-e wins over NET.evid") {
    write_text(tmp / "net.uai.evid", "1 1 1\n");
    write_text(tmp / "other.evid", "1 1 0\n");  // b = 0: 0.5*1 + 0.5*3 = 2
    const ProcessResult r =
        run_kinfer({"pe", (tmp / "net.uai").string(), "-e", (tmp / "other.evid").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == Printed(std::log10(2.0)));
  }
}

TEST_CASE("Pe.ImpossibleEvidence", "[io][apps]") {
  // f1(a, b) is zero wherever a = 1; observing a = 1 makes P(e) = 0.
  TempDir tmp;
  write_text(tmp / "z.uai", "MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n2\n0.5 0.5\n4\n1 2 0 0\n");
  write_text(tmp / "z.evid", "1 0 1\n");
  const std::string net = (tmp / "z.uai").string();
  SECTION("text") {
    const ProcessResult r = run_kinfer({"pe", net, "-e", (tmp / "z.evid").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == -INFINITY);
    CHECK_THAT(r.out, Catch::Contains("log10 P(e) = -inf"));
    // The warning names the factor that is zero and where its table starts (its entry count).
    CHECK_THAT(r.err, Catch::Contains("factor 1"));
    CHECK_THAT(r.err, Catch::Contains(net + " line 9"));
  }
  SECTION("json") {
    const ProcessResult r = run_kinfer({"pe", net, "-e", (tmp / "z.evid").string(), "--json"});
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("log10_pr") == "-inf");
    CHECK(j.at("ln_pr") == "-inf");
    CHECK_THAT(j.at("impossible").get<std::string>(), Catch::Contains("factor 1"));
  }
  SECTION("jointly impossible, no single factor zero") {
    // f0 allows only a = 0, f1 only a = 1: each factor alone is fine, the product is zero.
    write_text(tmp / "j.uai", "MARKOV\n2\n2 2\n2\n1 0\n2 0 1\n2\n1 0\n4\n0 0 1 1\n");
    const ProcessResult r = run_kinfer({"pe", (tmp / "j.uai").string()});
    REQUIRE(r.rc == 0);
    CHECK(printed_log10(r) == -INFINITY);
  }
}

TEST_CASE("Pe.MemoryLimitIsAResourceError", "[io][apps]") {
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const ProcessResult r = run_kinfer({"pe", net, "--max-memory", "1K", "--order", "minfill"});
  CHECK(r.rc == 3);
  CHECK(r.out.empty());
  // below the program's own footprint: refused before the order search, with the numbers
  const std::string e = single_error(r);
  CHECK_THAT(e, Catch::Contains("--max-memory 1 KiB is below what any plan needs"));
  CHECK_THAT(e, Catch::Contains("the program ("));
}

TEST_CASE("Cli.JsonErrorsAreJsonOnStdout", "[io][apps]") {
  TempDir tmp;
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const std::vector<std::tuple<std::string, std::vector<std::string>, int>> cases = {
      {"missing network", {"pe", (tmp / "none.uai").string(), "--json"}, 2},
      {"usage error", {"pe", net, "--json", "--threads", "0"}, 2},
      {"memory limit", {"pe", net, "--json", "--max-memory", "1K"}, 3},
      {"info", {"info", (tmp / "none.uai").string(), "--json"}, 2},
      {"lod", {"lod", "--ped", (tmp / "p").string(), "--dat", (tmp / "d").string(), "--json"}, 2},
  };
  for (const auto& [name, args, code] : cases) {
    DYNAMIC_SECTION(name) {
      const ProcessResult r = run_kinfer(args);
      INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
      CHECK(r.rc == code);
      const auto j = nlohmann::json::parse(r.out);
      CHECK(j.at("exit_code").get<int>() == code);
      CHECK(!j.at("error").get<std::string>().empty());
    }
  }
}

TEST_CASE("Cli.OutputPathsCheckedBeforeComputing", "[io][apps]") {
  TempDir tmp;
  write_text(tmp / "afile", "x\n");
  const std::string net = (test_data_dir() / kGood).string();
  const std::string ex = (data_dir() / "linkage" / "fastlink_example").string();
  const std::vector<std::string> lod = {"lod", "--ped", ex + "/pedfile.dat", "--dat",
                                        ex + "/datafile.dat"};
  auto with = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::string missing_dir = (tmp / "no" / "such").string();
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>> cases = {
      {"pe --uai-output a folder", {"pe", net, "--uai-output", tmp.path().string()},
       tmp.path().string()},
      {"pe --uai-output in a missing folder",
       {"pe", net, "--uai-output", missing_dir + "/x.PR"}, missing_dir},
      {"lod --out an existing file", with(lod, {"--out", (tmp / "afile").string()}),
       (tmp / "afile").string()},
      {"lod --plot in a missing folder", with(lod, {"--plot", missing_dir + "/x.svg"}),
       missing_dir},
      {"lod --plot of another kind", with(lod, {"--plot", (tmp / "x.pdf").string()}), "x.pdf"},
      {"batch --out an existing file",
       {"batch", (data_dir() / "batch" / "example.tsv").string(), "--out",
        (tmp / "afile").string()},
       (tmp / "afile").string()},
  };
  for (const auto& [name, args, path] : cases) {
    DYNAMIC_SECTION(name) {
      const ProcessResult r = run_kinfer(args);
      INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
      CHECK(r.rc == 2);
      CHECK(r.out.empty());  // nothing was computed
      CHECK_THAT(r.err, Catch::Contains(path));
      CHECK(r.err.find("internal error") == std::string::npos);
    }
  }
}

TEST_CASE("Pe.JsonOutput", "[io][apps]") {
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const ProcessResult r = run_kinfer({"pe", net, "--json", "--order", "minfill"});
  REQUIRE(r.rc == 0);
  INFO(r.out);
  const auto j = nlohmann::json::parse(r.out);
  const double log10_pr = j.at("log10_pr").get<double>();
  const double ln_pr = j.at("ln_pr").get<double>();
  CHECK(ln_pr == Approx(log10_pr * std::log(10.0)).epsilon(1e-12));
  CHECK(std::abs(log10_pr - -17.2155) <= 5e-5);  // UAI 2014 reference solution
  CHECK(j.at("seconds").get<double>() >= 0);
  const auto& o = j.at("order");
  CHECK(o.at("heuristic") == "min-fill");
  CHECK(o.at("width").get<int>() > 0);
  CHECK(o.at("log2_max_table").get<double>() > 0);
  CHECK(o.at("log2_total_state").get<double>() >= o.at("log2_max_table").get<double>());
  CHECK(j.at("buckets").get<int>() > 1);
}

TEST_CASE("Pe.UaiOutputFile", "[io][apps]") {
  TempDir tmp;
  const fs::path out = tmp / "answer.PR";
  const ProcessResult r =
      run_kinfer({"pe", (test_data_dir() / kGood).string(), "--uai-output", out.string()});
  REQUIRE(r.rc == 0);
  const std::string text = read_text(out);
  REQUIRE(text.rfind("PR\n", 0) == 0);
  CHECK(std::stod(text.substr(3)) == Approx(std::log10(5.0)).epsilon(1e-9));
  CHECK(text.back() == '\n');
}

TEST_CASE("Cli.UsageErrors", "[io][apps]") {
  const std::string net = (test_data_dir() / kGood).string();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"no subcommand", {}},
      {"unknown subcommand", {"frobnicate", net}},
      {"no network", {"pe"}},
      {"unknown option", {"pe", net, "--no-such-option"}},
      {"unknown heuristic", {"pe", net, "--order", "bogus"}},
      {"bad memory size", {"pe", net, "--max-memory", "12Q"}},
      {"negative threads", {"pe", net, "--threads", "-1"}},
      {"zero threads", {"pe", net, "--threads", "0"}},
      {"option without value", {"pe", net, "-e"}},
  };
  for (const auto& [name, args] : cases) {
    DYNAMIC_SECTION(name) {
      const ProcessResult r = run_kinfer(args);
      INFO("stderr:\n" << r.err);
      CHECK(r.rc == 2);
      CHECK(!r.err.empty());
      CHECK(r.out.find("log10 P(e)") == std::string::npos);
    }
  }
  SECTION("--help is not an error") {
    const ProcessResult r = run_kinfer({"pe", "--help"});
    CHECK(r.rc == 0);
  }
  SECTION("--version") {
    const ProcessResult r = run_kinfer({"--version"});
    CHECK(r.rc == 0);
    CHECK_THAT(r.out, Catch::StartsWith("kinfer "));
  }
  SECTION("a range error names the range plainly") {
    const ProcessResult r = run_kinfer({"pe", net, "--threads", "-1"});
    CHECK_THAT(r.err, Catch::Contains("--threads: must be a whole number >= 1, not -1"));
  }
}

TEST_CASE("Check.PeAndLodGiveAVerdict", "[io][apps]") {
  // `--check` compares every bucket on the CPU and the GPU. Without a GPU (CI) nothing can be
  // compared: the CPU answer, "check: not run" and exit 6; with one, "check: passed" and exit 0.
  const ProcessResult pe =
      run_kinfer({"pe", (data_dir() / "uai" / "Pedigree_11.uai").string(), "--check", "--json"});
  INFO(pe.err);
  const nlohmann::json j = nlohmann::json::parse(pe.out);
  CHECK(j.at("log10_pr").is_number());
  REQUIRE(j.contains("check"));
  if (pe.rc == 6) {
    CHECK(j.at("check").at("passed").is_null());
    CHECK_THAT(j.at("check").at("not_run").get<std::string>(), Catch::Contains("no GPU"));
  } else {
    CHECK(pe.rc == 0);
    CHECK(j.at("check").at("passed") == true);
  }
  const ProcessResult text =
      run_kinfer({"pe", (data_dir() / "uai" / "Pedigree_11.uai").string(), "--check"});
  CHECK(text.rc == pe.rc);
  CHECK_THAT(text.out, Catch::Contains(pe.rc == 6 ? "check: not run" : "check: passed"));
  const std::string c03 =
      (data_dir() / "linkage" / "analytic" / "C03_nuclear_two_founders").string();
  const ProcessResult lod = run_kinfer(
      {"lod", "--ped", c03 + ".pre", "--dat", c03 + ".dat", "--order", "minfill", "--check"});
  INFO(lod.err);
  CHECK(lod.rc == pe.rc);
  CHECK_THAT(lod.err, Catch::Contains(pe.rc == 6 ? "check: not run" : "check: passed"));
  const ProcessResult lod_json = run_kinfer({"lod", "--ped", c03 + ".pre", "--dat", c03 + ".dat",
                                             "--order", "minfill", "--check", "--json"});
  CHECK(lod_json.rc == pe.rc);
  const nlohmann::json lj = nlohmann::json::parse(lod_json.out);
  REQUIRE(lj.contains("check"));
  if (pe.rc == 6)
    CHECK(lj.at("check").at("passed").is_null());
  else
    CHECK(lj.at("check").at("passed") == true);
}

// The end of a process that used the GPU (apps/process_exit.cpp): the driver's release is left to
// a helper process sharing the memory and the descriptors. KINFER_EXIT=helper takes that path
// without a GPU: the answer still comes out whole through a pipe, the exit status is kinfer's,
// and no process is left running once the helper is done (a zombie left where process 1 does
// not reap has no command line and is not counted: that is why the helper is used only under an
// init that reaps, or when asked for, as here).
TEST_CASE("Exit.HelperKeepsTheOutputAndTheStatus", "[io][apps]") {
  TempDir t;
  const std::string name = "exit-helper-" + std::to_string(getpid());
  const fs::path net = t / (name + ".uai");
  fs::copy_file(uai_network_path("Pedigree_11"), net);
  fs::copy_file(data_dir() / "uai" / "Pedigree_11.uai.evid", t / (name + ".uai.evid"));
  const std::string exe = shell_quote(env_or_throw("KINFER_EXE"));
  const ProcessResult ok = run_shell(t.path(), "(KINFER_EXIT=helper " + exe + " pe " +
                                                   shell_quote(net.string()) + " --json -v | cat)");
  INFO("stderr:\n" << ok.err);
  REQUIRE(ok.rc == 0);
  CHECK(!lines_with(ok.err, "left to a helper process").empty());
  const auto j = nlohmann::json::parse(ok.out);
  const double ref = std::stod(read_references().at("Pedigree_11"));
  CHECK(j.at("log10_pr").get<double>() == Approx(ref).margin(5e-5));
  // A failing run keeps its status (3: over --max-memory).
  const ProcessResult over =
      run_shell(t.path(), "KINFER_EXIT=helper " + exe + " pe " + shell_quote(net.string()) +
                              " --max-memory 1K");
  CHECK(over.rc == 3);
  // No running process with the network's name on its command line is left (the helper shares
  // it).
  auto left = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::ifstream f(e.path() / "cmdline", std::ios::binary);
      std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (cmd.find(name) != std::string::npos) ++n;
    }
    return n;
  };
  int n = left();
  for (int i = 0; i < 100 && n > 0; ++i) usleep(10'000), n = left();
  CHECK(n == 0);
}

TEST_CASE("Pe.ExplainSaysWhatMatters", "[io][apps]") {
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const ProcessResult r = run_kinfer({"pe", net, "--explain", "--device", "cpu"});
  REQUIRE(r.rc == 0);
  INFO(r.out);
  for (const char* part : {"order ", "memory ", "work ", "placement "})
    CHECK(lines_with(r.out, part).size() == 1);
  // one placement line for a run on the CPU, not one per bucket (Pedigree_11 has 230)
  CHECK(lines_with(r.out, " cpu ").empty());
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') < 20);
  const ProcessResult j = run_kinfer({"pe", net, "--explain", "--device", "cpu", "--json"});
  REQUIRE(j.rc == 0);
  const auto e = nlohmann::json::parse(j.out).at("explain");
  const auto& top = e.at("largest_buckets");
  REQUIRE(!top.empty());
  double share = 0, last = 1;
  for (const auto& b : top) {
    CHECK(b.at("work_share").get<double>() <= last);
    last = b.at("work_share").get<double>();
    share += last;
    CHECK(b.at("log2_states").get<double>() <= e.at("order").at("log2_total_state").get<double>());
  }
  CHECK(share <= 1.0 + 1e-12);
  CHECK(e.at("memory").at("peak_bytes").is_number_integer());
}

TEST_CASE("Pe.MemoryLimitAboveWhatIsAvailableIsLowered", "[io][apps]") {
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const ProcessResult r = run_kinfer({"pe", net, "--max-memory", "100T", "--json"});
  REQUIRE(r.rc == 0);
  INFO(r.err);
  CHECK_THAT(r.err, Catch::Contains("--max-memory 100 TiB is more than the") &&
                        Catch::Contains("available now"));
  const auto j = nlohmann::json::parse(r.out);
  const auto& m = j.at("memory_limit");
  CHECK(m.at("lowered") == true);
  CHECK(m.at("requested_bytes").get<double>() == Approx(100.0 * (1ull << 40)));
  CHECK(m.at("used_bytes").get<double>() < m.at("available_bytes").get<double>());
  CHECK(std::abs(j.at("log10_pr").get<double>() - -17.2155) <= 5e-5);  // UAI 2014 reference
}

// A comparison of the CPU/GPU policies needs no GPU and no calibration: the shipped profile of
// --gpu (default: this GPU's, else the H100's), named in the output.
TEST_CASE("ScheduleCompare.ShippedProfileWithoutCalibration", "[io][apps]") {
  TempDir tmp;
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  // an empty cache folder: no profile from `kinfer calibrate`
  const std::string home = "XDG_CACHE_HOME=" + (tmp / "cache").string();
  auto compare = [&](std::vector<std::string> extra) {
    std::string cmd = home;
    for (const std::string& a : {env_or_throw("KINFER_EXE"), std::string("schedule-compare"), net,
                                 std::string("--repeat"), std::string("1"), std::string("--json")}) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    for (const auto& a : extra) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    return run_shell(fs::current_path(), cmd);
  };
  const ProcessResult r = compare({"--gpu", "h200"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK_THAT(j.at("profile").get<std::string>(), Catch::EndsWith("h200.json"));
  CHECK_THAT(j.at("profile_choice").get<std::string>(), Catch::Contains("--gpu h200"));
  // every policy has a finite prediction, the GPU's too
  for (const auto& p : j.at("policies")) CHECK(p.at("predicted_seconds").is_number());
  const ProcessResult d = compare({});
  REQUIRE(d.rc == 0);
  CHECK(!nlohmann::json::parse(d.out).at("profile_choice").get<std::string>().empty());
  const ProcessResult bad = compare({"--gpu", "h300"});
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.err, Catch::Contains("no shipped profile named 'h300'"));
}

TEST_CASE("Info.JsonByteCountsAreWholeNumbers", "[io][apps]") {
  const std::string net = (data_dir() / "uai" / "Pedigree_11.uai").string();
  const ProcessResult r = run_kinfer({"info", net, "--json", "--order", "minfill"});
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"estimated_peak_bytes", "input_bytes", "largest_table_bytes"})
    CHECK(j.at("memory").at(k).is_number_integer());
  CHECK(j.at("unconditioned_peak_bytes").is_number_integer());
  const ProcessResult t = run_kinfer({"info", net, "--order", "minfill"});
  REQUIRE(t.rc == 0);
  CHECK(lines_with(t.out, "estimated memory").size() == 1);
  CHECK(t.out.find(" MB") == std::string::npos);  // binary units, as the log's
  CHECK(lines_with(t.out, "MiB peak").size() == 1);
}
