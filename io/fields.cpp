#include "io/fields.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace kinfer::io {

std::vector<Line> split_lines(const std::string& text) {
  std::vector<Line> lines;
  long number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++number;
    Line line{number, {}};
    std::size_t i = pos;
    while (i < end) {
      while (i < end && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      std::size_t start = i;
      while (i < end && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i > start)
        line.fields.push_back(
            {text.substr(start, i - start), static_cast<int>(line.fields.size()) + 1});
    }
    if (!line.fields.empty()) lines.push_back(std::move(line));
    pos = end + 1;
  }
  return lines;
}

bool parse_double(const std::string& s, double& v) {
  v = 0;
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}

bool parse_int(const std::string& s, long& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string fmt(double x) {
  std::ostringstream s;
  s.precision(10);
  s << x;
  return s.str();
}

}  // namespace kinfer::io
