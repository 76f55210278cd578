#pragma once
// Small helpers every folder uses, kept once here: atomic file writes, the median of timings,
// seconds since a moment, and byte counts for people to read.
#include <chrono>
#include <string>
#include <vector>

namespace kinfer {

// Seconds from `t0` to now, on the steady clock every timing of kinfer reads.
inline double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Writes `content` to `path` so that readers see the old file or the whole new one, even after
// a crash or power loss: a temporary file in the same folder, fsync, rename, fsync the folder.
// Creates missing parent folders. Throws InputError(path, 0, why) when it cannot.
void write_file_atomically(const std::string& path, const std::string& content);

// The median of `v` (the mean of the two middle values for an even count); NaN when empty.
double median(std::vector<double> v);

// Bytes with a binary unit and three significant digits: "183 MiB", "1.5 GiB", "512 B".
std::string human_bytes(double bytes);

// Logs (at debug level, `-v`) this process's resident and peak resident memory and the seconds
// since it started, with `where`: the trail that shows where a run's memory and time go.
void log_resources(const char* where);

}  // namespace kinfer
