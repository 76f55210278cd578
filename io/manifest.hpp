#pragma once
// Batch manifests: the jobs of `kinfer batch`, as a TSV with a header row or a JSON list.
//
// TSV columns (header names, any order): id, kind (pe | lod | mar | mpe), network, evidence,
// ped, dat, options. Empty cells mean "absent"; lines starting with '#' and blank lines are skipped.
// JSON: [{"id": ..., "kind": ..., "network": ..., "options": "--order minfill" or [..]}, ...].
// File paths are relative to the manifest's folder. `options` are the single command's options.
#include <string>
#include <vector>

namespace kinfer::io {

struct Job {
  std::string id;
  std::string kind;                  // "pe", "lod", "mar" or "mpe"
  std::string network, evidence;     // pe, mar, mpe (absolute or manifest-relative resolved paths)
  std::string ped, dat;              // lod
  std::vector<std::string> options;  // extra arguments for the command
  long line = 0;                     // where it was declared
};

// Parses and validates the whole manifest before anything runs: missing columns, unknown kinds,
// duplicate or unusable ids, missing files and malformed options each throw InputError naming
// the line.
std::vector<Job> read_manifest(const std::string& path);

// Splits an options string like a shell would for plain words and '...' / "..." quoting.
std::vector<std::string> split_options(const std::string& text, const std::string& file, long line);

}  // namespace kinfer::io
