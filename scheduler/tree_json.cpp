#include "scheduler/tree_json.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "engine/errors.hpp"
#include "engine/json.hpp"

namespace kinfer::sched {

namespace {

using nlohmann::json;

// Line where each element of the top-level "nodes" array starts, so that errors found after
// parsing can still name a line. A small scanner over the (already valid) JSON text.
std::vector<long> node_lines(const std::string& text) {
  std::vector<long> lines;
  long line = 1;
  int depth = 0, nodes_depth = -1;
  bool in_string = false, escaped = false, expect_value = false;
  std::string str, last_string, key;
  for (char ch : text) {
    if (ch == '\n') ++line;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false, last_string = str;
      else
        str += ch;
      continue;
    }
    if (depth == nodes_depth && expect_value && ch != ' ' && ch != '\t' && ch != '\n' &&
        ch != '\r' && ch != ']') {
      lines.push_back(line);
      expect_value = false;
    }
    switch (ch) {
      case '"':
        in_string = true, str.clear();
        break;
      case ':':
        if (depth == 1) key = last_string;
        break;
      case ',':
        if (depth == nodes_depth) expect_value = true;
        break;
      case '{':
        ++depth;
        break;
      case '[':
        ++depth;
        if (depth == 2 && key == "nodes" && nodes_depth < 0) nodes_depth = 2, expect_value = true;
        break;
      case '}':
      case ']':
        if (depth == nodes_depth && ch == ']') nodes_depth = -2;  // the array ended
        --depth;
        break;
      default:
        break;
    }
  }
  return lines;
}

// Seconds from a JSON value; null means "cannot run there" where `allow_null`.
double seconds(const json& node, const char* field, bool required, bool allow_null,
               const std::string& file, long line, const std::string& who) {
  auto it = node.find(field);
  if (it == node.end()) {
    if (required) throw InputError(file, line, who + ": missing \"" + field + "\" (seconds)");
    return 0;
  }
  if (it->is_null() && allow_null) return std::numeric_limits<double>::infinity();
  if (!it->is_number())
    throw InputError(file, line,
                     who + ": \"" + field + "\" must be a number of seconds" +
                         (allow_null ? " or null" : "") + ", not " + it->dump());
  const double x = it->get<double>();
  if (x < 0 || !std::isfinite(x))
    throw InputError(file, line,
                     who + ": \"" + field + "\" is " + it->dump() + "; costs must be non-negative");
  return x;
}

long long integer_id(const json& v, const std::string& file, long line, const std::string& what) {
  if (!v.is_number_integer())
    throw InputError(file, line, what + " must be an integer id, not " + v.dump());
  return v.get<long long>();
}

}  // namespace

CostTree parse_cost_tree(const std::string& text, const std::string& file) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    long line = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    // "[json.exception.parse_error.101] parse error at line 4, column 50: syntax error ..."
    std::string what = e.what();
    if (auto p = what.find("column "); p != std::string::npos) what = what.substr(p);
    throw InputError(file, line, "not valid JSON at " + what);
  }
  if (!doc.is_object())
    throw InputError(file, 1, "expected a JSON object {\"root\": id, \"nodes\": [...]}");
  if (!doc.contains("nodes") || !doc["nodes"].is_array())
    throw InputError(file, 1, "expected \"nodes\": an array of node objects");
  if (!doc.contains("root"))
    throw InputError(file, 1, "expected \"root\": the id of the root node");
  const long long root_id = integer_id(doc["root"], file, 1, "\"root\"");
  const json& nodes = doc["nodes"];
  if (nodes.empty()) throw InputError(file, 1, "\"nodes\" is empty");
  const std::vector<long> lines = node_lines(text);
  auto line_of = [&](std::size_t k) { return k < lines.size() ? lines[k] : 0L; };

  CostTree t;
  t.nodes.resize(nodes.size());
  std::map<long long, int> index;
  std::vector<std::vector<long long>> child_ids(nodes.size());
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const json& n = nodes[k];
    const long line = line_of(k);
    const std::string pos = "nodes[" + std::to_string(k) + "]";
    if (!n.is_object()) throw InputError(file, line, pos + " must be an object");
    if (!n.contains("id")) throw InputError(file, line, pos + ": missing \"id\"");
    CostNode& v = t.nodes[k];
    v.id = integer_id(n["id"], file, line, pos + " \"id\"");
    const std::string who = "node " + std::to_string(v.id);
    if (!index.emplace(v.id, static_cast<int>(k)).second)
      throw InputError(file, line,
                       who + ": the id is used twice (also at line " +
                           std::to_string(line_of(index[v.id])) + ")");
    for (auto it = n.begin(); it != n.end(); ++it) {
      static const char* known[] = {"id", "children", "cpu", "gpu", "upload", "to_gpu", "to_cpu"};
      bool ok = false;
      for (const char* f : known) ok |= it.key() == f;
      if (!ok)
        throw InputError(file, line,
                         who + ": unknown field \"" + it.key() +
                             "\" (expected id, children, cpu, gpu, upload, to_gpu, "
                             "to_cpu)");
    }
    v.cpu = seconds(n, "cpu", true, false, file, line, who);
    v.gpu = seconds(n, "gpu", true, true, file, line, who);
    v.upload = seconds(n, "upload", false, false, file, line, who);
    v.to_gpu = seconds(n, "to_gpu", false, false, file, line, who);
    v.to_cpu = seconds(n, "to_cpu", false, false, file, line, who);
    if (n.contains("children")) {
      if (!n["children"].is_array())
        throw InputError(file, line, who + ": \"children\" must be an array of ids");
      for (const json& c : n["children"])
        child_ids[k].push_back(integer_id(c, file, line, who + ": a child"));
    }
  }

  // Links: each child known, each node with at most one parent.
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    CostNode& v = t.nodes[k];
    const std::string who = "node " + std::to_string(v.id);
    for (long long cid : child_ids[k]) {
      auto it = index.find(cid);
      if (it == index.end())
        throw InputError(file, line_of(k),
                         who + ": child " + std::to_string(cid) + " is not the id of any node");
      const int c = it->second;
      if (c == static_cast<int>(k))
        throw InputError(file, line_of(k), who + " is its own child (a cycle)");
      if (t.nodes[c].parent >= 0)
        throw InputError(file, line_of(k),
                         "node " + std::to_string(cid) + " has two parents: node " +
                             std::to_string(t.nodes[t.nodes[c].parent].id) + " and " + who);
      t.nodes[c].parent = static_cast<int>(k);
      v.children.push_back(c);
    }
  }
  auto rit = index.find(root_id);
  if (rit == index.end())
    throw InputError(file, 1,
                     "\"root\" is " + std::to_string(root_id) + ", not the id of any node");
  t.root = rit->second;
  if (t.nodes[t.root].parent >= 0)
    throw InputError(file, line_of(t.root),
                     "the root, node " + std::to_string(root_id) + ", is a child of node " +
                         std::to_string(t.nodes[t.nodes[t.root].parent].id) + " (a cycle)");
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (t.nodes[k].parent < 0 && static_cast<int>(k) != t.root)
      throw InputError(file, line_of(k),
                       "node " + std::to_string(t.nodes[k].id) + " has no parent and is not " +
                           "the root: two roots (\"root\" is " + std::to_string(root_id) + ")");
  // Every node now has one parent except the root; whatever the root does not reach is a cycle.
  try {
    validate(t);
  } catch (const std::invalid_argument& e) {
    long line = 0;
    const std::string what = e.what();
    for (std::size_t k = 0; k < nodes.size(); ++k)
      if (what.rfind("node " + std::to_string(t.nodes[k].id) + " ", 0) == 0) line = line_of(k);
    throw InputError(file, line, what);
  }
  return t;
}

CostTree read_cost_tree(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, 0, "cannot read: it is a folder, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path, 0, "cannot open the tree file");
  std::ostringstream s;
  s << f.rdbuf();
  return parse_cost_tree(s.str(), path);
}

json to_json(const CostTree& t) {
  json nodes = json::array();
  for (const CostNode& v : t.nodes) {
    json children = json::array();
    for (int c : v.children) children.push_back(t.nodes[c].id);
    nodes.push_back({{"id", v.id},
                     {"children", children},
                     {"cpu", v.cpu},
                     {"gpu", number_or_null(v.gpu)},
                     {"upload", v.upload},
                     {"to_gpu", v.to_gpu},
                     {"to_cpu", v.to_cpu}});
  }
  return {{"root", t.nodes[t.root].id}, {"nodes", nodes}};
}

json to_json(const CostTree& t, const Schedule& s, bool explain) {
  json assignment = json::object(), reasons = json::object();
  for (std::size_t v = 0; v < t.nodes.size(); ++v) {
    const std::string id = std::to_string(t.nodes[v].id);
    assignment[id] = to_string(s.device[v]);
    if (explain) reasons[id] = s.reason[v];
  }
  const double cost = s.cost.total();
  const bool feasible = std::isfinite(cost);
  json j = {{"assignment", assignment},
            {"cost", number_or_null(cost)},
            {"feasible", feasible},
            {"on_gpu", s.cost.on_gpu},
            {"crossings", s.cost.crossings},
            {"breakdown",
             {{"compute", feasible ? json(s.cost.compute) : json(nullptr)},
              {"edges", s.cost.edges},
              {"uploads", s.cost.uploads},
              {"download", s.cost.download}}}};
  if (explain) j["reasons"] = reasons;
  return j;
}

}  // namespace kinfer::sched
