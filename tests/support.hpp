#pragma once
// The one support header of the tests: where the data is, temporary folders, reading and
// writing files, and running the real `kinfer` executable (KINFER_EXE) or a shell command with
// its exit code, stdout and stderr. Tests that run the real executable are tagged [apps].
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kinfer::test {

namespace fs = std::filesystem;

inline std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw std::runtime_error(std::string(name) + " is not set; run the tests with `meson test`");
  return v;
}

// Sets an environment variable (nullptr: unsets it) for the object's lifetime; then restores
// the value it had, or its absence, also when a REQUIRE ends the test early.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* o = std::getenv(name)) had_ = true, old_ = o;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) {
    if (value)
      ::setenv(name_.c_str(), value, 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// <repo>/data (UAI instances and REFERENCES.tsv).
inline fs::path data_dir() { return env_or_throw("KINFER_DATA"); }

// <repo>/tests/data (small files made for the tests, e.g. malformed input).
inline fs::path test_data_dir() { return data_dir().parent_path() / "tests" / "data"; }

// <repo>/data/linkage (LINKAGE locus and pedigree files, analytic cases, FASTLINK's example).
inline fs::path linkage_data_dir() { return data_dir() / "linkage"; }

// A bundled UAI instance by name ("Pedigree_11"): its .uai or .uai.gz; empty when absent.
inline fs::path uai_network_path(const std::string& name) {
  const fs::path dir = data_dir() / "uai";
  for (const std::string suffix : {".uai", ".uai.gz"})
    if (fs::exists(dir / (name + suffix))) return dir / (name + suffix);
  return {};
}

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

// data/uai/REFERENCES.tsv: instance name -> the reference log10 P(e) as printed ("-17.2155").
inline std::map<std::string, std::string> read_references() {
  const fs::path tsv = data_dir() / "uai" / "REFERENCES.tsv";
  std::istringstream in(read_text(tsv));
  std::string line;
  std::getline(in, line);  // header: instance, ref_log10_pr, precision, source, note
  if (line.rfind("instance\tref_log10_pr\t", 0) != 0)
    throw std::runtime_error(tsv.string() + ":1: expected the header instance, ref_log10_pr, ...");
  std::map<std::string, std::string> refs;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string name, value;
    std::getline(row, name, '\t');
    std::getline(row, value, '\t');
    if (!name.empty()) refs[name] = value;
  }
  return refs;
}

// A fresh folder under the system's temporary directory, removed with its content.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kinfer-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

struct ProcessResult {
  int rc = -1;  // exit status; 128 + signal number when killed by a signal
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the shell command line `cmd` in folder `dir`, capturing stdout and stderr.
inline ProcessResult run_shell(const fs::path& dir, const std::string& cmd) {
  TempDir tmp;
  const std::string full = "cd " + shell_quote(dir.string()) + " && " + cmd + " >" +
                           shell_quote((tmp / "out").string()) + " 2>" +
                           shell_quote((tmp / "err").string()) + " </dev/null";
  const int status = std::system(full.c_str());
  if (status == -1) throw std::runtime_error("cannot run: " + full);
  ProcessResult r;
  // The shell reports a signal-killed child as 128 + signal.
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(tmp / "out");
  r.err = read_text(tmp / "err");
  return r;
}

// Runs KINFER_EXE with `args` (no shell interpretation of the arguments) in the current folder.
inline ProcessResult run_kinfer(const std::vector<std::string>& args) {
  std::string cmd = shell_quote(env_or_throw("KINFER_EXE"));
  for (const auto& a : args) cmd += ' ' + shell_quote(a);
  return run_shell(fs::current_path(), cmd);
}

// The lines of `text` that contain `needle`.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);)
    if (line.find(needle) != std::string::npos) found.push_back(line);
  return found;
}

}  // namespace kinfer::test
