#pragma once
// Error kinds that map onto kinfer's exit codes: 2 bad input/usage, 3 resource limit, 1 internal.
#include <stdexcept>
#include <string>

namespace kinfer {

// Bad input: names the file and line (0 = whole file) and what was expected.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, long line, const std::string& what)
      : std::runtime_error(format(file, line, what)), file_(std::move(file)), line_(line) {}
  const std::string& file() const { return file_; }
  long line() const { return line_; }

 private:
  static std::string format(const std::string& file, long line, const std::string& what) {
    return line > 0 ? file + ":" + std::to_string(line) + ": " + what : file + ": " + what;
  }
  std::string file_;
  long line_;
};

// A computation that would exceed a resource limit (memory); raised before allocating.
class ResourceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A GPU allocation failed while a plan ran (the device's memory, or the driver's pinned host
// memory): another process may hold what was free when the run began. The runner computes the
// plan on the CPU instead when that fits the host memory limit.
class DeviceMemoryError : public ResourceError {
 public:
  using ResourceError::ResourceError;
};

}  // namespace kinfer
