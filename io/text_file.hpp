#pragma once
// Whole-file reading (gzip transparently) and a tokenizer that remembers line numbers, so every
// parser error can name the file, the line and what was expected.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kinfer::io {

// Reads a file, decompressing gzip when the content is gzip. Throws InputError.
std::string read_file(const std::string& path);

class Tokenizer {
 public:
  Tokenizer(std::string path, std::string text);
  const std::string& path() const { return path_; }
  bool at_end();  // skips whitespace
  long line() const { return line_; }
  // Each of these throws InputError naming the file and line, and `what` was expected.
  std::string_view word(const std::string& what);
  std::int64_t integer(const std::string& what, std::int64_t lo, std::int64_t hi);
  double number(const std::string& what);
  [[noreturn]] void fail(const std::string& message) const;

 private:
  void skip_space();
  std::string path_, text_;
  std::size_t pos_ = 0;
  long line_ = 1;
};

}  // namespace kinfer::io
