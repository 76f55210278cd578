#include "io/manifest.hpp"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/errors.hpp"
#include "io/text_file.hpp"

namespace kinfer::io {

namespace fs = std::filesystem;

std::vector<std::string> split_options(const std::string& text, const std::string& file,
                                       long line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(cur), cur.clear(), in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) throw InputError(file, line, "unterminated quote in options: " + text);
  if (in_word) out.push_back(cur);
  return out;
}

namespace {

const std::set<std::string> kColumns = {"id",  "kind", "network", "evidence",
                                        "ped", "dat",  "options"};

// The text field of `j` that column or key `name` fills; nullptr for "options" (a list).
std::string* text_field(Job& j, const std::string& name) {
  if (name == "id") return &j.id;
  if (name == "kind") return &j.kind;
  if (name == "network") return &j.network;
  if (name == "evidence") return &j.evidence;
  if (name == "ped") return &j.ped;
  if (name == "dat") return &j.dat;
  return nullptr;
}

void validate(std::vector<Job>& jobs, const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  std::map<std::string, long> ids;
  for (Job& j : jobs) {
    if (j.id.empty()) throw InputError(path, j.line, "job has an empty id");
    for (char c : j.id)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
        throw InputError(path, j.line,
                         "job id '" + j.id +
                             "' may contain only letters, digits, '_', '-' and '.' "
                             "(it names the job's result file)");
    if (j.id == "." || j.id == "..")
      throw InputError(path, j.line, "job id '" + j.id + "' is not usable");
    auto [it, fresh] = ids.emplace(j.id, j.line);
    if (!fresh)
      throw InputError(
          path, j.line,
          "duplicate job id '" + j.id + "' (first on line " + std::to_string(it->second) + ")");
    auto need = [&](std::string& file, const char* what) {
      if (file.empty())
        throw InputError(path, j.line,
                         "job '" + j.id + "' of kind " + j.kind + " needs a '" + what + "' column");
      fs::path p = fs::path(file).is_absolute() ? fs::path(file) : dir / file;
      if (!fs::exists(p))
        throw InputError(path, j.line,
                         "job '" + j.id + "': " + what + " file '" + file +
                             "' does not exist (looked for " + p.string() + ")");
      file = fs::absolute(p).lexically_normal().string();
    };
    if (j.kind == "pe" || j.kind == "mar" || j.kind == "mpe") {
      need(j.network, "network");
      if (!j.evidence.empty()) need(j.evidence, "evidence");
    } else if (j.kind == "lod") {
      need(j.ped, "ped");
      need(j.dat, "dat");
    } else {
      throw InputError(path, j.line,
                       "job '" + j.id + "' has unknown kind '" + j.kind +
                           "', expected pe, lod, mar or mpe");
    }
  }
  if (jobs.empty()) throw InputError(path, 0, "the manifest lists no jobs");
}

std::vector<Job> read_tsv(const std::string& path, const std::string& text) {
  std::vector<Job> jobs;
  std::istringstream in(text);
  std::string row;
  long line = 0;
  std::vector<std::string> header;
  auto split = [](const std::string& r) {
    std::vector<std::string> cells;
    std::string cur;
    for (char c : r) {
      if (c == '\t')
        cells.push_back(cur), cur.clear();
      else if (c != '\r')
        cur += c;
    }
    cells.push_back(cur);
    return cells;
  };
  while (std::getline(in, row)) {
    ++line;
    if (row.find_first_not_of(" \t\r") == std::string::npos || row[0] == '#') continue;
    std::vector<std::string> cells = split(row);
    if (header.empty()) {
      header = cells;
      std::set<std::string> seen;
      for (const auto& h : header) {
        if (!kColumns.count(h))
          throw InputError(path, line,
                           "unknown column '" + h +
                               "' in the header, expected some of: id kind network "
                               "evidence ped dat options");
        if (!seen.insert(h).second)
          throw InputError(path, line, "column '" + h + "' appears twice");
      }
      for (const char* req : {"id", "kind"})
        if (!seen.count(req))
          throw InputError(path, line,
                           std::string("the header lacks the required column '") + req +
                               "' (columns are separated by tabs)");
      continue;
    }
    if (cells.size() != header.size())
      throw InputError(path, line,
                       "expected " + std::to_string(header.size()) +
                           " tab-separated columns as in the header, found " +
                           std::to_string(cells.size()));
    Job j;
    j.line = line;
    for (std::size_t c = 0; c < header.size(); ++c) {
      const std::string& h = header[c];
      const std::string& v = cells[c];
      if (h == "options")
        j.options = split_options(v, path, line);
      else if (std::string* f = text_field(j, h))
        *f = v;
    }
    jobs.push_back(std::move(j));
  }
  if (header.empty()) throw InputError(path, 0, "the manifest is empty, expected a header row");
  return jobs;
}

std::vector<Job> read_json(const std::string& path, const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // byte offset -> line
    long line = 1;
    for (std::size_t i = 0; i < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    throw InputError(path, line, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_array()) throw InputError(path, 1, "expected a JSON list of jobs");
  // Approximate each job's line by the position of its object in the text.
  std::vector<long> lines;
  {
    long line = 1;
    int depth = 0;
    bool in_str = false, esc = false;
    for (char c : text) {
      if (in_str) {
        if (esc)
          esc = false;
        else if (c == '\\')
          esc = true;
        else if (c == '"')
          in_str = false;
      } else if (c == '"') {
        in_str = true;
      } else if (c == '{') {
        if (depth == 1) lines.push_back(line);
        ++depth;
      } else if (c == '}') {
        --depth;
      } else if (c == '[') {
        ++depth;
      } else if (c == ']') {
        --depth;
      }
      if (c == '\n') ++line;
    }
  }
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const auto& o = doc[i];
    Job j;
    j.line = i < lines.size() ? lines[i] : 0;
    if (!o.is_object())
      throw InputError(path, j.line, "job " + std::to_string(i + 1) + " is not an object");
    for (auto it = o.begin(); it != o.end(); ++it) {
      const std::string& k = it.key();
      if (!kColumns.count(k))
        throw InputError(path, j.line,
                         "unknown key '" + k +
                             "', expected some of: id kind network "
                             "evidence ped dat options");
      if (k == "options") {
        if (it->is_string())
          j.options = split_options(it->get<std::string>(), path, j.line);
        else if (it->is_array() &&
                 std::all_of(it->begin(), it->end(), [](auto& x) { return x.is_string(); }))
          j.options = it->get<std::vector<std::string>>();
        else
          throw InputError(path, j.line, "'options' must be a string or a list of strings");
        continue;
      }
      if (!it->is_string()) throw InputError(path, j.line, "'" + k + "' must be a string");
      if (std::string* f = text_field(j, k)) *f = it->get<std::string>();
    }
    if (!o.contains("id") || !o.contains("kind"))
      throw InputError(path, j.line, "job " + std::to_string(i + 1) + " lacks 'id' or 'kind'");
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace

std::vector<Job> read_manifest(const std::string& path) {
  const std::string text = read_file(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  std::vector<Job> jobs = first != std::string::npos && text[first] == '[' ? read_json(path, text)
                                                                           : read_tsv(path, text);
  validate(jobs, path);
  return jobs;
}

}  // namespace kinfer::io
