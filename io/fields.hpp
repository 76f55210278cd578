#pragma once
// Whitespace-separated fields of a text file, with their line and column numbers, for parsers
// whose errors name the file, the line and the column (LINKAGE and MERLIN files).
#include <string>
#include <vector>

namespace kinfer::io {

struct Field {
  std::string text;
  int column = 0;  // 1-based position among the line's whitespace-separated fields
};

struct Line {
  long number = 0;
  std::vector<Field> fields;
};

// Every non-blank line of `text`, split at whitespace.
std::vector<Line> split_lines(const std::string& text);
// The whole string is a finite number / an integer.
bool parse_double(const std::string& s, double& v);
bool parse_int(const std::string& s, long& v);
// A number for messages (10 significant digits).
std::string fmt(double x);

}  // namespace kinfer::io
