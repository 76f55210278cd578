#include "io/text_file.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/errors.hpp"

namespace kinfer::io {

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "cannot read: it is a folder, not a file");
  {
    std::ifstream probe(path);
    if (!probe) throw InputError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  }
  gzFile f = gzopen(path.c_str(), "rb");  // also reads uncompressed files as they are
  if (!f) throw InputError(path, 0, "cannot open");
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string why = msg ? msg : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw InputError(path, 0, "cannot read (corrupt or truncated gzip data?): " + why);
  return text;
}

Tokenizer::Tokenizer(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {}

void Tokenizer::skip_space() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '\n') ++line_;
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') break;
    ++pos_;
  }
}

bool Tokenizer::at_end() {
  skip_space();
  return pos_ >= text_.size();
}

void Tokenizer::fail(const std::string& message) const { throw InputError(path_, line_, message); }

std::string_view Tokenizer::word(const std::string& what) {
  if (at_end()) {
    // Name the last line with content, not the empty position after the final newline.
    long last = line_;
    for (std::size_t i = text_.size();
         i-- > 0 && std::isspace(static_cast<unsigned char>(text_[i]));)
      last -= text_[i] == '\n';
    throw InputError(path_, std::max(last, 1L), "unexpected end of file, expected " + what);
  }
  std::size_t start = pos_;
  while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  return std::string_view(text_).substr(start, pos_ - start);
}

std::int64_t Tokenizer::integer(const std::string& what, std::int64_t lo, std::int64_t hi) {
  std::string_view w = word(what);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || p != w.data() + w.size())
    fail("expected " + what + " (an integer), found '" + std::string(w) + "'");
  if (v < lo || v > hi)
    fail("expected " + what + " between " + std::to_string(lo) + " and " + std::to_string(hi) +
         ", found " + std::string(w));
  return v;
}

double Tokenizer::number(const std::string& what) {
  std::string_view w = word(what);
  std::string s(w);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || s.empty())
    fail("expected " + what + " (a number), found '" + s + "'");
  return v;
}

}  // namespace kinfer::io
